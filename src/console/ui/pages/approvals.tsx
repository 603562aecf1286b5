import type { approvalView } from "../../../approvals/service";
import { exactBaseUnitsOf } from "../../../lib/money";
import { Csrf, usdOfBaseUnits, When } from "../layout";
import { ChargeLink } from "./charge";

/** The pending approvals, each with its grant and reject forms. */
export const ApprovalsPage = (props: { csrf: string; approvals: ReturnType<typeof approvalView>[] }) => (
  <div class="card">
    {props.approvals.length === 0 ? <p class="muted">Nothing is waiting for a human.</p> : null}
    <table>
      <thead>
        <tr>
          <th>Approval</th>
          <th class="num">Amount</th>
          <th>Agent</th>
          <th>Merchant</th>
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
              <span class="muted">
                charge <ChargeLink chargeId={a.chargeId} />
              </span>
            </td>
            <td class="num">{usdOfBaseUnits(exactBaseUnitsOf(a))}</td>
            <td>
              <a href={`/console/ui/agents/${a.agentId}`}>
                <code>{a.agentId}</code>
              </a>
            </td>
            <td>
              <code>{a.merchantId}</code>
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
