import { ChargeIdParam } from "../charges/routes";
import { error, INVALID, json, NOT_FOUND, type Operation } from "../lib/api-operation";
import { PayoutParam } from "../payouts/routes";
import { Evidence, Receipt } from "./responses";
import { AgentX402PaymentIdParam, RefundIdParam } from "./routes";

const VERIFY =
  "Verify it offline with the keys at `GET /.well-known/jwks.json` (by the header's `kid`); the payload's `auditSeq` and `auditHash` name the audit row that records it. The same receipt comes back on every read.";

/** Signed receipts of paid charges, paid payouts and succeeded refunds. */
export const RECEIPT_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/charges/:chargeId/receipt",
    operationId: "getChargeReceipt",
    summary: "A paid charge's signed receipt",
    description: `The charge id is the capability to read it, as for the charge. The payload is a \`ChargeReceiptPayload\`. ${VERIFY}`,
    tag: "Proofs",
    auth: "public",
    params: ChargeIdParam,
    responses: {
      200: json(Receipt, "The receipt."),
      400: INVALID,
      404: NOT_FOUND("charge, or one not paid yet", "charge_not_found"),
    },
  },
  {
    method: "get",
    path: "/merchant/payouts/:payoutId/receipt",
    operationId: "getPayoutReceipt",
    summary: "A paid payout's signed receipt",
    description: `Once the payout is \`paid\`. The payload is a \`PayoutReceiptPayload\`. ${VERIFY}`,
    tag: "Proofs",
    auth: "merchant",
    params: PayoutParam,
    responses: {
      200: json(Receipt, "The receipt."),
      400: INVALID,
      404: NOT_FOUND("payout, or one not paid (yet)", "payout_not_found"),
    },
  },
  {
    method: "get",
    path: "/merchant/refunds/:refundId/receipt",
    operationId: "getRefundReceipt",
    summary: "A succeeded refund's signed receipt",
    description: `Once the refund is \`succeeded\`. The payload is a \`RefundReceiptPayload\`. ${VERIFY}`,
    tag: "Proofs",
    auth: "merchant",
    params: RefundIdParam,
    responses: {
      200: json(Receipt, "The receipt."),
      400: INVALID,
      404: NOT_FOUND("refund, or one not succeeded (yet)", "refund_not_found"),
    },
  },
  {
    method: "get",
    path: "/agent/x402/payments/:paymentId/receipt",
    operationId: "getAgentX402PaymentReceipt",
    summary: "A settled outbound x402 payment's signed receipt",
    description: `Once the agent's payment is \`settled\` (the token shows the service's authorization used). The payload is an \`AgentX402ReceiptPayload\`. ${VERIFY}`,
    tag: "Proofs",
    auth: "agent",
    params: AgentX402PaymentIdParam,
    responses: {
      200: json(Receipt, "The receipt."),
      400: INVALID,
      404: NOT_FOUND("payment of this agent, or one not settled (yet)", "agent_x402_payment_not_found"),
    },
  },
  {
    method: "get",
    path: "/merchant/charges/:chargeId/evidence",
    operationId: "getChargeEvidence",
    summary: "A paid charge's evidence file",
    description:
      "Everything a third party needs to check offline that the payment happened as its receipt says and is in the tamper-evident audit history: the receipt, the payment's audit row, the first signed checkpoint covering that row with the Merkle path from the row to the checkpoint's root (sibling hashes only: no other row is shown), the checkpoint's anchoring transaction, and the published keys. Ready once a checkpoint covers the payment and is on chain (checkpoints are made every minute).",
    tag: "Proofs",
    auth: "merchant",
    params: ChargeIdParam,
    responses: {
      200: json(Evidence, "The evidence file (served as an attachment)."),
      400: INVALID,
      404: NOT_FOUND("charge of this merchant, or one not paid yet", "charge_not_found"),
      409: {
        ...error(
          "No anchored checkpoint covers the payment yet (`evidence_not_ready`); `Retry-After` says when to ask again.",
          "evidence_not_ready",
        ),
        headers: { "Retry-After": "Seconds to wait." },
      },
    },
  },
];
