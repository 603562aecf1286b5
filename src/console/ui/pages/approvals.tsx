import type { approvalView } from "../../../approvals/service";
import { exactBaseUnitsOf } from "../../../lib/money";
import { Csrf, usdOfBaseUnits, When } from "../layout";
import { ChargeLink } from "./charge";

type ApprovalItem = ReturnType<typeof approvalView>;

/** What an approval holds: a charge, or an agent's outbound x402 payment of a resource (on which network). */
const HeldFor = (props: { approval: ApprovalItem }) => {
  const x = props.approval.x402Payment;
  if (!x)
    return (
      <span class="muted">
        charge <ChargeLink chargeId={props.approval.chargeId!} />
      </span>
    );
  return (
    <span class="muted">
      x402 payment of <code class="x402-resource">{x.resource}</code> on {x.network}
    </span>
  );
};

/** The pending approvals, each with its grant and reject forms. */
export const ApprovalsPage = (props: { csrf: string; approvals: ApprovalItem[] }) => (
  <div class="card">
    {props.approvals.length === 0 ? <p class="muted">Nothing is waiting for a human.</p> : null}
    <table>
      <thead>
        <tr>
          <th>Approval</th>
          <th class="num">Amount</th>
          <th>Agent</th>
          <th>Merchant or payee</th>
          <th>Reason</th>
          <th>Expires</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        {props.approvals.map((a) => (
          <tr id={`approval-${a.approvalId}`}>
            <td>
              <code>{a.approvalId}</code>
              <br />
              <HeldFor approval={a} />
            </td>
            <td class="num">{usdOfBaseUnits(exactBaseUnitsOf(a))}</td>
            <td>
              <a href={`/console/ui/agents/${a.agentId}`}>
                <code>{a.agentId}</code>
              </a>
            </td>
            <td>
              {a.x402Payment ? (
                <>
                  <span class="muted">pays </span>
                  <code class="x402-pay-to">{a.x402Payment.payTo}</code>
                </>
              ) : (
                <code>{a.merchantId}</code>
              )}
            </td>
            <td>{a.reason}</td>
            <td>
              <When iso={a.expiresAt} />
            </td>
            <td>
              <form
                method="post"
                action={`/console/ui/approvals/${a.approvalId}/grant`}
                class="inline"
                onsubmit={`return confirm('Grant ${usdOfBaseUnits(exactBaseUnitsOf(a))} from ${a.agentId}?')`}
              >
                <Csrf token={props.csrf} />
                <button type="submit" name="grant">
                  Grant
                </button>
              </form>{" "}
              <form
                method="post"
                action={`/console/ui/approvals/${a.approvalId}/reject`}
                class="inline"
                onsubmit="return confirm('Reject this payment?')"
              >
                <Csrf token={props.csrf} />
                <button type="submit" class="danger" name="reject">
                  Reject
                </button>
              </form>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);
