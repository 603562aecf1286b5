import { error, INVALID, json, type Operation, OVERLOADED } from "../lib/api-operation";
import { ApprovalGranted, ApprovalList, ApprovalRejected } from "./responses";
import { ApprovalParam, ListQuery } from "./routes";

/** Approvals held for a human. */
export const APPROVAL_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/console/approvals",
    operationId: "listApprovals",
    summary: "List approvals",
    tag: "Console approvals",
    auth: "console",
    query: ListQuery,
    responses: { 200: json(ApprovalList, "Approvals, newest first."), 400: INVALID },
  },
  {
    method: "post",
    path: "/approvals/:id/grant",
    operationId: "grantApproval",
    summary: "Grant an approval",
    description:
      "Pays the held charge; 402 if the balance or hard limits no longer allow it (the approval stays pending). An approval of an agent's outbound x402 payment is only marked granted (no `charge` in the answer): the agent's same request, made again before the approval expires, pays, once.",
    tag: "Approvals",
    auth: "console",
    params: ApprovalParam,
    responses: {
      200: json(ApprovalGranted, "Granted; the charge is paid (an outbound x402 payment's approval: granted only)."),
      402: error(
        "The policy or balance refuses it now.",
        "excede_tope_por_transaccion",
        "categoria_no_permitida",
        "excede_limite_diario",
        "saldo_insuficiente",
      ),
      404: error("`approval_not_found`.", "approval_not_found"),
      409: error(
        "The approval is not pending or has expired (`approval_not_pending`, `approval_expired`), the charge is no longer pending (`charge_not_pending`), the checkout link it was born from is disabled (`checkout_link_disabled`), the agent is frozen (`agent_frozen`; the approval stays pending), or the charge's amount is not whole cents and it lives in another ledger shard than the agent (`cross_shard_amount_not_whole_cents`; the approval stays pending).",
        "approval_not_pending",
        "approval_expired",
        "charge_not_pending",
        "checkout_link_disabled",
        "agent_frozen",
        "cross_shard_amount_not_whole_cents",
      ),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/approvals/:id/reject",
    operationId: "rejectApproval",
    summary: "Reject an approval",
    description: "A held charge stays pending; an outbound x402 payment's request is never let through by it.",
    tag: "Approvals",
    auth: "console",
    params: ApprovalParam,
    responses: {
      200: json(ApprovalRejected, "Rejected."),
      404: error("`approval_not_found`.", "approval_not_found"),
      409: error("Not pending (`approval_not_pending`), or expired.", "approval_not_pending", "approval_expired"),
    },
  },
];
