import type { AgentX402PaymentView } from "../../../agents/x402-payments";
import { usdOfBaseUnits, When } from "../layout";

/**
 * The agent's payments of x402 paywalls anywhere, newest first: the exact amount in dollars (every
 * place below a cent shown), where its life stands, what it paid for, whom, and the transaction that
 * used the authorization once settled.
 */
export const AgentX402Payments = (props: { payments: AgentX402PaymentView[] }) => (
  <div class="card" id="x402-payments">
    {props.payments.length === 0 ? <p class="muted">No x402 payments yet.</p> : null}
    <table>
      <thead>
        <tr>
          <th>Payment</th>
          <th class="num">Amount</th>
          <th>Status</th>
          <th>Resource</th>
          <th>Pays</th>
          <th>Transaction</th>
          <th>Signed</th>
        </tr>
      </thead>
      <tbody>
        {props.payments.map((p) => (
          <tr id={`x402-payment-${p.paymentId}`}>
            <td>
              <code>{p.paymentId}</code>
            </td>
            <td class="num">{usdOfBaseUnits(p.amountBaseUnits)}</td>
            <td>{p.status}</td>
            <td class="mono">{p.resource}</td>
            <td class="mono">{p.payTo}</td>
            <td class="mono">{p.transaction ?? "none yet"}</td>
            <td>
              <When iso={p.createdAt} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);
