import type { PayoutView } from "../../../payouts/service";
import { counted, usd, When } from "../layout";
import { PAYOUT_STATUSES, type PayoutStatus } from "../queries";

/** The page shows this many payouts, newest first. */
export const PAYOUTS_SHOWN = 100;

const BADGE: Record<PayoutStatus, string> = { pending: "warn", paid: "ok", failed: "bad" };
const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
const href = (status: PayoutStatus | null) => (status ? `/console/ui/payouts?status=${status}` : "/console/ui/payouts");

/** The merchant's name above its id, when it has one. */
const MerchantName = (props: { name: string | undefined }) =>
  props.name === undefined ? null : (
    <>
      {props.name}
      <br />
    </>
  );

/** Every merchant's payouts, newest first, optionally of one status, under the totals by status. */
export const PayoutsPage = (props: {
  status: PayoutStatus | null;
  payouts: PayoutView[];
  more: boolean;
  merchantNames: Map<string, string>;
  totals: Record<PayoutStatus, { n: number; cents: number }>;
}) => {
  const { status, payouts } = props;
  return (
    <>
      <div class="grid" id="payout-totals">
        {PAYOUT_STATUSES.map((s) => (
          <div class="stat" id={`payout-total-${s}`}>
            <span class={BADGE[s]}>{capitalized(s)}</span>
            <b>{usd(props.totals[s].cents)}</b>
            <span class="muted">{counted(props.totals[s].n, "payout")}</span>
          </div>
        ))}
      </div>
      <nav class="filters" aria-label="Payouts by status">
        {[null, ...PAYOUT_STATUSES].map((s) => (
          <a href={href(s)} class={s === status ? "on" : undefined} aria-current={s === status ? "page" : undefined}>
            {s ?? "all"}
          </a>
        ))}
      </nav>
      <div class="card">
        <table id="payouts-table">
          <caption class="muted">{status ? `${capitalized(status)} payouts` : "All payouts"}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Payout</th>
              <th scope="col">Merchant</th>
              <th scope="col" class="num">
                Amount
              </th>
              <th scope="col">Destination</th>
              <th scope="col">Status</th>
              <th scope="col">Transaction</th>
              <th scope="col">Created</th>
              <th scope="col">Paid</th>
            </tr>
          </thead>
          <tbody>
            {payouts.map((p) => (
              <PayoutRow payout={p} merchantName={props.merchantNames.get(p.merchantId)} />
            ))}
          </tbody>
        </table>
        {payouts.length === 0 ? <p class="muted">{status ? `No ${status} payouts.` : "No payouts yet."}</p> : null}
        {props.more ? (
          <p class="muted" id="payouts-limit">
            The {PAYOUTS_SHOWN} newest are shown; there are more.
          </p>
        ) : null}
      </div>
    </>
  );
};

/** One payout: its merchant, amount and destination, its state (and why it failed) and its transaction. */
const PayoutRow = ({ payout: p, merchantName }: { payout: PayoutView; merchantName: string | undefined }) => (
  <tr id={`payout-${p.payoutId}`}>
    <td>
      <code>{p.payoutId}</code>
    </td>
    <td>
      <MerchantName name={merchantName} />
      <code>{p.merchantId}</code>
    </td>
    <td class="num">{usd(p.amountMinor)}</td>
    <td class="mono">{p.destination}</td>
    <td>
      <span class={`badge ${BADGE[p.status]}`}>{p.status}</span>
      {p.failureReason ? <div class="reason bad">{p.failureReason}</div> : null}
    </td>
    <td>
      {p.transaction ? (
        <code class="hash" title={p.transaction}>
          {p.transaction}
        </code>
      ) : (
        <span class="muted">-</span>
      )}
    </td>
    <td>
      <When iso={p.createdAt} />
    </td>
    <td>
      <When iso={p.paidAt} />
    </td>
  </tr>
);
