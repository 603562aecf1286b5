import { Hono } from "hono";
import { rejectApproval } from "../../../agents/approvals";
import { walletOf } from "../../../agents/wallet.do";
import { checkApprovalOpen } from "../../../agents/wallet-hold";
import { approvalView, findApproval, listApprovals } from "../../../approvals/service";
import type { AppEnv } from "../../../auth/app-env";
import { ApprovalsPage } from "../pages/approvals";
import { back, csrfOf, emailOf, render } from "../render";

/**
 * Approvals: the pending ones; granting a charge's pays it through the agent's wallet object (an
 * outbound x402 payment's is only marked granted: the agent's same request pays), rejecting leaves the charge pending.
 */
export const approvalRoutes = new Hono<AppEnv>()
  .get("/console/ui/approvals", async (c) => {
    const approvals = (await listApprovals(c.env, "pending", 200)).map(approvalView);
    return render(c, "Approvals", "/console/ui/approvals", <ApprovalsPage csrf={csrfOf(c)} approvals={approvals} />);
  })
  .post("/console/ui/approvals/:id/:decision{grant|reject}", async (c) => {
    // Held on the agent's home shard, which the id names.
    const found = await findApproval(c.env, c.req.param("id"));
    if (!found) return c.notFound();
    const { db, approval } = found;
    if (c.req.param("decision") === "grant") {
      const outcome = await walletOf(c.env, approval.agentId).grantApproval(approval.agentId, approval.id, emailOf(c));
      return back(
        c,
        ["approvals"],
        outcome.kind === "paid"
          ? `Granted: charge ${outcome.charge.chargeId} is paid.`
          : outcome.kind === "granted"
            ? `Granted: the agent's same x402 payment of ${approval.resource} goes through if it asks again before ${approval.expiresAt}.`
            : `Not granted: ${outcome.kind === "approval" ? "still held" : outcome.kind === "frozen" ? "the agent is frozen" : outcome.reason}.`,
      );
    }
    const closed = await checkApprovalOpen(c.env, approval, Date.now());
    const rejected = !closed && (await rejectApproval(db, approval.id, emailOf(c)));
    return back(
      c,
      ["approvals"],
      !rejected
        ? "That approval was already decided or expired."
        : approval.chargeId
          ? `Rejected; charge ${approval.chargeId} stays pending.`
          : "Rejected; nothing was paid.",
    );
  });
