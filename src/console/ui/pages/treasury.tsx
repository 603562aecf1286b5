import type { OutstandingAuthorizations } from "../../../agents/x402-life";
import type { FundingRow } from "../../../treasury/fundings";
import type { CheckDetail } from "../../../treasury/history";
import { Csrf, counted, usd, usdOfBaseUnits, When } from "../layout";
import { TreasuryChart } from "./treasury-chart";

/** The page charts and lists this many checks, newest first in the table. */
export const CHECKS_SHOWN = 100;

const BADGE: Record<string, string> = { balanced: "ok", surplus: "warn", shortfall: "bad" };

/** A figure of the latest check. */
const Stat = (props: { id: string; label: string; value: string; note?: string }) => (
  <div class="stat" id={props.id}>
    {props.label}
    <b>{props.value}</b>
    {props.note ? <span class="muted">{props.note}</span> : null}
  </div>
);

/** The page lists this many fundings, newest first. */
export const FUNDINGS_SHOWN = 10;

/** The operator's fundings: booking one by its transaction, and the latest booked. */
const Fundings = (props: { fundings: FundingRow[]; csrf: string; typed?: string }) => (
  <div class="card" id="treasury-fundings">
    <h2>Operator's float</h2>
    <p class="muted">
      Tokens put into the settlement address on purpose (a float to pay payouts from) are booked by their transaction,
      once: the ledger then expects them, and they no longer read as a surplus.
    </p>
    <form method="post" action="/console/ui/treasury/fundings">
      <Csrf token={props.csrf} />
      <label for="f-transaction">Transaction hash</label>
      <input id="f-transaction" name="transaction" required placeholder="0x…" value={props.typed ?? ""} />
      <button type="submit" id="treasury-book-funding">
        Book as float
      </button>
    </form>
    {props.fundings.length > 0 ? (
      <table id="treasury-fundings-list">
        <caption class="muted">The {props.fundings.length} latest fundings, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Booked</th>
            <th scope="col">Transaction</th>
            <th scope="col" class="num">
              Amount
            </th>
            <th scope="col">By</th>
          </tr>
        </thead>
        <tbody>
          {props.fundings.map((f) => (
            <tr>
              <td>
                <When iso={f.bookedAt} />
              </td>
              <td>
                <code class="hash" title={f.transaction}>
                  {f.transaction}
                </code>
              </td>
              <td class="num">{usdOfBaseUnits(f.amountBaseUnits)}</td>
              <td>{f.bookedBy}</td>
            </tr>
          ))}
        </tbody>
      </table>
    ) : (
      <p class="muted">No funding booked yet.</p>
    )}
  </div>
);

/** The latest check's figures, the history as a chart and a table, "Check now", and the fundings. */
export function TreasuryPage(props: {
  checks: CheckDetail[];
  fundings: FundingRow[];
  /** Read now, not from the latest check: what the settlement address has signed and not yet paid. */
  outstanding: OutstandingAuthorizations;
  settlementAddress: string;
  csrf: string;
  /** The transaction typed in the funding form, shown again with its refusal. */
  typed?: string;
}) {
  const [latest] = props.checks;
  return (
    <>
      <p class="muted">
        What the service holds on chain (the settlement address <code>{props.settlementAddress}</code> and every
        receiving address not swept yet, read at one block) against what the ledger expects it to hold: every credited
        deposit and settled x402 payment, less every paid payout and on-chain refund, plus the operator's float. A
        surplus is tokens that came outside any payment (or are not credited yet); a shortfall is tokens gone that the
        ledger did not send.
      </p>
      <form method="post" action="/console/ui/treasury/check" class="inline">
        <Csrf token={props.csrf} />
        <button type="submit" id="treasury-check-now">
          Check now
        </button>
      </form>
      {latest ? (
        <>
          <LatestCheck latest={latest} />
          <div class="card">
            <h2>Holdings against the ledger</h2>
            <TreasuryChart checks={props.checks} />
          </div>
          <ChecksTable checks={props.checks} />
        </>
      ) : (
        <p class="muted" id="treasury-none">
          No check yet: the cron runs one every minute, or check now.
        </p>
      )}
      <Promised outstanding={props.outstanding} />
      <Fundings fundings={props.fundings} csrf={props.csrf} typed={props.typed} />
    </>
  );
}

/** Agents' x402 authorizations signed from the settlement address and not yet used on chain or released. */
const Promised = ({ outstanding }: { outstanding: OutstandingAuthorizations }) => (
  <div class="card" id="treasury-promised">
    <h2>Promised, not yet paid</h2>
    <p class="muted">
      Agents' x402 payments the settlement address has signed that no paywall has used on chain yet, and whose window
      has not closed: each may still take its amount. A new payment is refused while the settlement address, less these,
      cannot cover it.
    </p>
    <div class="grid">
      <Stat
        id="treasury-promised-count"
        label="Outstanding authorizations"
        value={counted(outstanding.count, "authorization")}
      />
      <Stat
        id="treasury-promised-total"
        label="They may take"
        value={usdOfBaseUnits(outstanding.totalBaseUnits)}
        note="exact to the base unit"
      />
    </div>
  </div>
);

/** The latest check: its status, when and at which block, and its figures. */
const LatestCheck = ({ latest }: { latest: CheckDetail }) => (
  <>
    <h2>
      Latest check <span class={`badge ${BADGE[latest.status] ?? ""}`}>{latest.status}</span>
    </h2>
    <p class="muted">
      <When iso={latest.at} />, block {latest.asOfBlock}, {latest.addressesRead} receiving addresses read.
    </p>
    <div class="grid" id="treasury-latest">
      <Stat id="treasury-total" label="Held on chain" value={usdOfBaseUnits(latest.totalBaseUnits)} />
      <Stat id="treasury-settlement" label="Settlement address" value={usdOfBaseUnits(latest.settlementBaseUnits)} />
      <Stat
        id="treasury-receiving"
        label="Receiving addresses"
        value={usdOfBaseUnits(latest.depositAddressesBaseUnits)}
        note="not swept yet"
      />
      <Stat id="treasury-expected" label="Ledger expects" value={usdOfBaseUnits(latest.expectedBaseUnits)} />
      <Stat
        id="treasury-float"
        label="Operator's float"
        value={usdOfBaseUnits(latest.floatBaseUnits)}
        note="booked fundings, in the expectation"
      />
      <Stat id="treasury-difference" label="Difference" value={usdOfBaseUnits(latest.differenceBaseUnits)} />
      <Stat
        id="treasury-pending"
        label="Pending out"
        value={usd(latest.pendingOutMinor)}
        note="payouts and refunds being sent"
      />
    </div>
  </>
);

/** The latest checks, newest first. */
const ChecksTable = ({ checks }: { checks: CheckDetail[] }) => (
  <div class="card">
    <table id="treasury-checks">
      <caption class="muted">The {checks.length} latest checks, newest first</caption>
      <thead>
        <tr>
          <th scope="col">When</th>
          <th scope="col" class="num">
            Block
          </th>
          <th scope="col">Status</th>
          <th scope="col" class="num">
            Held
          </th>
          <th scope="col" class="num">
            Expected
          </th>
          <th scope="col" class="num">
            Difference
          </th>
        </tr>
      </thead>
      <tbody>
        {checks.map((c) => (
          <tr>
            <td>
              <When iso={c.at} />
            </td>
            <td class="num">{c.asOfBlock}</td>
            <td>
              <span class={`badge ${BADGE[c.status] ?? ""}`}>{c.status}</span>
            </td>
            <td class="num">{usdOfBaseUnits(c.totalBaseUnits)}</td>
            <td class="num">{usdOfBaseUnits(c.expectedBaseUnits)}</td>
            <td class="num">{usdOfBaseUnits(c.differenceBaseUnits)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);
