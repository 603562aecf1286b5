import { Hono } from "hono";
import { z } from "zod";
import { rejectApproval } from "../agents/approvals";
import { payOutcomeResponse } from "../agents/outcomes";
import { walletOf } from "../agents/wallet.do";
import { checkApprovalOpen } from "../agents/wallet-hold";
import { grantedBody } from "../agents/x402-approvals";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { ApiError } from "../lib/errors";
import { pathId, validate } from "../lib/validation";
import { APPROVAL_STATUSES, approvalView, findApproval, listApprovals } from "./service";

export const ListQuery = z.object({
  status: z.enum(APPROVAL_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
export const ApprovalParam = z.object({ id: pathId });

export const approvalRoutes = new Hono<AppEnv>()
  .get("/console/approvals", requireActor("console"), validate("query", ListQuery), async (c) => {
    const { status, limit } = c.req.valid("query");
    const rows = await listApprovals(c.env, status, limit);
    return c.json({ approvals: rows.map(approvalView) });
  })
  .post(
    "/approvals/:id/grant",
    // The payment's answer is stored where its last batch commits: with the approval, in the agent's home.
    requireActor("console", { money: "pays" }),
    validate("param", ApprovalParam),
    async (c) => {
      const found = await findApproval(c.env, c.req.valid("param").id);
      if (!found) throw new ApiError(404, "approval_not_found");
      const { approval } = found;
      const { email } = actorOf(c.get("actor"), "console");
      const outcome = await walletOf(c.env, approval.agentId).grantApproval(
        approval.agentId,
        approval.id,
        email,
        c.get("idempotency"),
      );
      // An outbound x402 payment's approval: granted, nothing paid; the agent's same request pays.
      if (outcome.kind === "granted") return c.json(grantedBody(outcome.approvalId), 200);
      return payOutcomeResponse(c, outcome, { kind: "approval", approvalId: approval.id }, "console");
    },
  )
  .post("/approvals/:id/reject", requireActor("console"), validate("param", ApprovalParam), async (c) => {
    const found = await findApproval(c.env, c.req.valid("param").id);
    if (!found) throw new ApiError(404, "approval_not_found");
    const { db, approval } = found;
    const conflict = await checkApprovalOpen(c.env, approval, Date.now());
    if (conflict) throw new ApiError(409, conflict.kind === "conflict" ? conflict.reason : "approval_not_pending");
    if (!(await rejectApproval(db, approval.id, actorOf(c.get("actor"), "console").email)))
      throw new ApiError(409, "approval_not_pending");
    return c.json({ approval: { approvalId: approval.id, status: "rejected" } });
  });
