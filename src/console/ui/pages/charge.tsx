import type { ChargeView } from "../../../charges/service";
import type { RefundView } from "../../../refunds/service";
import { dollarsField } from "../forms";
import { Csrf, usdOfBaseUnits, When } from "../layout";

const CHARGE_BADGE: Record<string, string> = { paid: "ok", pending: "warn" };
const REFUND_BADGE: Record<string, string> = { succeeded: "ok", pending: "warn", failed: "bad" };

/** Where a charge's refund goes, by how it was paid. */
const refundGoes = (method: string | null) =>
  method === "x402" ? "on chain to the address that paid it" : "back to the paying agent's wallet";

/** A charge's path in the console. */
export const chargeHref = (chargeId: string) => `/console/ui/charges/${encodeURIComponent(chargeId)}`;

/** A charge id as a link to its page. */
export const ChargeLink = (props: { chargeId: string }) => (
  <a href={chargeHref(props.chargeId)}>
    <code>{props.chargeId}</code>
  </a>
);

/** A hash or reference in a cell: shortened on screen, whole on hover and when copied. */
const Hash = (props: { value: string | null }) =>
  props.value ? (
    <code class="hash" title={props.value}>
      {props.value}
    </code>
  ) : (
    <span class="muted">-</span>
  );

/** The refusals of the refunds service in plain words; the code follows in brackets. `remaining` is in base units. */
export function refusalText(code: string, remaining: bigint | number): string {
  const words: Record<string, string> = {
    charge_not_paid: "the charge is not paid, so there is nothing to refund",
    refund_exceeds_remaining: `that is more than what remains to refund of this charge (${usdOfBaseUnits(BigInt(remaining))})`,
    saldo_insuficiente:
      "the merchant's balance is below the amount: it has already paid out or refunded what this refund would take",
    refund_destination_flagged:
      "the address that paid failed KYT screening, so nothing is sent to it; the money stays with the merchant",
    treasury_not_configured:
      "on-chain refunds are not set up on this service (they need the settlement key, a gas key and the chain)",
    charge_not_found: "there is no such charge",
  };
  return `Not refunded: ${words[code] ?? "the service refused it"} (${code}).`;
}

/**
 * One charge for an operator: its figures and details, a refund form while something of a paid
 * charge remains, and its refunds oldest first. The operator refunds as the charge's merchant.
 */
export const ChargePage = (props: {
  csrf: string;
  charge: ChargeView;
  merchantName: string | null;
  refunds: RefundView[];
  /** What was typed in the amount field, shown again when the refund was refused. */
  typed?: string;
}) => {
  const { charge } = props;
  // Exact: what of the amount refunds can still return, below a cent too (a refund without an amount takes it).
  const remaining = BigInt(charge.amountBaseUnits) - BigInt(charge.refundedBaseUnits);
  return (
    <>
      <ChargeFigures charge={charge} remaining={remaining} />
      <ChargeDetails charge={charge} merchantName={props.merchantName} />
      {charge.status === "paid" && remaining > 0n ? (
        <RefundForm
          csrf={props.csrf}
          charge={charge}
          merchant={props.merchantName ?? charge.merchantId}
          remaining={remaining}
          typed={props.typed ?? ""}
        />
      ) : (
        <p class="muted" id="refund-none">
          {charge.status === "paid"
            ? "Refunded in full: nothing remains to refund."
            : "Not paid: there is nothing to refund."}
        </p>
      )}
      <h2>Refunds</h2>
      <RefundsTable refunds={props.refunds} />
    </>
  );
};

/** The charge's amount, status, what is refunded and what remains. */
const ChargeFigures = (props: { charge: ChargeView; remaining: bigint }) => {
  const { charge } = props;
  return (
    <div class="grid" id="charge-figures">
      <div class="stat">
        Amount<b id="charge-amount">{usdOfBaseUnits(charge.amountBaseUnits)}</b>
      </div>
      <div class="stat">
        Status
        <b>
          <span id="charge-status" class={`badge ${CHARGE_BADGE[charge.status] ?? "muted"}`}>
            {charge.status}
          </span>
        </b>
      </div>
      <div class="stat">
        Refunded<b id="charge-refunded">{usdOfBaseUnits(charge.refundedBaseUnits)}</b>
      </div>
      <div class="stat">
        Remaining<b id="charge-remaining">{usdOfBaseUnits(props.remaining)}</b>
      </div>
    </div>
  );
};

/** A row of the details table: a heading and its cell. */
const Detail = (props: { label: string; children: unknown }) => (
  <tr>
    <th scope="row">{props.label}</th>
    <td>{props.children as never}</td>
  </tr>
);

const Dash = () => <span class="muted">-</span>;

/** The charge's details: who, what, how it was paid and when. */
const ChargeDetails = (props: { charge: ChargeView; merchantName: string | null }) => {
  const { charge } = props;
  return (
    <div class="card">
      <table id="charge-details" class="details">
        <caption class="muted">The charge</caption>
        <tbody>
          <Detail label="Charge">
            <code>{charge.chargeId}</code>
          </Detail>
          <Detail label="Merchant">
            {props.merchantName ? (
              <>
                {props.merchantName}
                <br />
              </>
            ) : null}
            <code>{charge.merchantId}</code>
          </Detail>
          {charge.description ? <Detail label="Description">{charge.description}</Detail> : null}
          <Detail label="Method">{charge.method ?? <Dash />}</Detail>
          <Detail label="Reference / transaction">
            {charge.reference ? <code>{charge.reference}</code> : <Dash />}
          </Detail>
          <Detail label="Agent">
            {charge.agentId ? (
              <a href={`/console/ui/agents/${encodeURIComponent(charge.agentId)}`}>
                <code>{charge.agentId}</code>
              </a>
            ) : (
              <Dash />
            )}
          </Detail>
          <Detail label="Created">
            <When iso={charge.createdAt} />
          </Detail>
          <Detail label="Paid">
            <When iso={charge.paidAt} />
          </Detail>
        </tbody>
      </table>
    </div>
  );
};

/** The charge's refunds, oldest first, each with its state and transaction. */
const RefundsTable = (props: { refunds: RefundView[] }) => (
  <div class="card">
    <table id="refunds-table">
      <caption class="muted">Refunds of this charge, oldest first</caption>
      <thead>
        <tr>
          <th scope="col">Refund</th>
          <th scope="col" class="num">
            Amount
          </th>
          <th scope="col">Status</th>
          <th scope="col">Method</th>
          <th scope="col">Transaction</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {props.refunds.map((r) => (
          <tr id={`refund-${r.refundId}`}>
            <td>
              <code>{r.refundId}</code>
            </td>
            <td class="num">{usdOfBaseUnits(r.amountBaseUnits)}</td>
            <td>
              <span class={`badge ${REFUND_BADGE[r.status] ?? "muted"}`}>{r.status}</span>
              {r.status === "pending" ? (
                <div class="reason warn">Being sent on chain; reload this page to see its state.</div>
              ) : null}
              {r.failureReason ? <div class="reason bad">{r.failureReason}</div> : null}
            </td>
            <td>{r.method}</td>
            <td>
              <Hash value={r.transaction} />
            </td>
            <td>
              <When iso={r.createdAt} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
    {props.refunds.length === 0 ? <p class="muted">No refunds.</p> : null}
  </div>
);

/** The refund form, with a confirmation naming the amount, the charge and the merchant the operator acts for. */
const RefundForm = (props: {
  csrf: string;
  charge: ChargeView;
  merchant: string;
  remaining: bigint;
  typed: string;
}) => {
  const { charge, remaining } = props;
  const everything = `Refund everything that remains (${usdOfBaseUnits(remaining)})`;
  const rest = ` of ${charge.chargeId} as merchant ${props.merchant}?`;
  // The strings go in as JSON, so a quote in a merchant's name cannot end them.
  const confirm = `const a=this.amount.value.trim().replace(/^\\$/,'');return confirm((a?'Refund $'+a:${JSON.stringify(everything)})+${JSON.stringify(rest)})`;
  return (
    <form
      method="post"
      action={`${chargeHref(charge.chargeId)}/refunds`}
      class="card"
      id="refund-form"
      onsubmit={confirm}
    >
      <Csrf token={props.csrf} />
      <input type="hidden" name="seenRefundedMinor" value={String(charge.refundedMinor)} />
      <h2>Refund</h2>
      <p class="muted">
        You refund as the merchant {props.merchant}: the amount comes out of its balance and goes{" "}
        {refundGoes(charge.method)}.
        {charge.method === "x402" ? " It is sent after the page answers, and shows pending until then." : ""}
      </p>
      <label for="r-amount">Amount ($, optional)</label>
      <input
        id="r-amount"
        name="amount"
        inputmode="decimal"
        value={props.typed}
        // The field takes cents: a remainder below a cent is refunded by leaving it empty.
        placeholder={remaining % 10_000n === 0n ? dollarsField(Number(remaining / 10_000n)) : ""}
        aria-describedby="r-amount-hint"
      />
      <span class="hint" id="r-amount-hint">
        Empty refunds everything that remains: {usdOfBaseUnits(remaining)}.
      </span>
      <button type="submit" class="danger" id="refund">
        Refund
      </button>
    </form>
  );
};
