import { error, INVALID, json, NOT_FOUND, type Operation } from "../lib/api-operation";
import { body, CredentialNotAllowed } from "../lib/api-shapes";
import { TREASURY_UNAVAILABLE } from "../payouts/operations";
import { RefundCreated, RefundDestinationFlagged, RefundList } from "./responses";
import { RefundBody, RefundChargeParam } from "./routes";

/** Refunds: money given back on a paid charge. */
export const REFUND_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/merchant/charges/:chargeId/refunds",
    operationId: "refundCharge",
    summary: "Refund a paid charge",
    description:
      "Full or partial; several per charge, never more than the charge. A wallet or PayLink payment goes back to the paying agent's wallet (within the request; with ledger shards, an agent in another shard than the merchant's is credited by a second step that, if it fails, recovery finishes moments later) (its daily spend and the grant's budget are not restored). An x402 payment goes back on chain to the payer, from the settlement address, at most once: `pending`, then `succeeded` or `failed`. The merchant's balance is debited at once either way. Without `amountUsdCents`, what remains is refunded, exactly: a charge below a cent (or between cents) is refunded to the base unit (`amountBaseUnits`). An amount in cents above what remains is refused, compared exactly.",
    tag: "Refunds",
    auth: "merchant",
    params: RefundChargeParam,
    body: body("RefundRequest", RefundBody),
    bodyOptional: true,
    responses: {
      201: json(RefundCreated, "Refunded (or, for x402, debited and on its way)."),
      400: INVALID,
      403: json(
        [RefundDestinationFlagged, CredentialNotAllowed],
        "The x402 payer does not pass screening (nothing debited), or a credential of another kind.",
        { errors: ["refund_destination_flagged"] },
      ),
      404: NOT_FOUND("charge (or another merchant's)", "charge_not_found"),
      409: error(
        "The charge is not paid (`charge_not_paid`), the amount is more than what remains of it (`refund_exceeds_remaining`), or more than the merchant's balance (`saldo_insuficiente`). Nothing moves.",
        "charge_not_paid",
        "refund_exceeds_remaining",
        "saldo_insuficiente",
      ),
      503: TREASURY_UNAVAILABLE,
    },
  },
  {
    method: "get",
    path: "/merchant/charges/:chargeId/refunds",
    operationId: "listChargeRefunds",
    summary: "A charge's refunds",
    tag: "Refunds",
    auth: "merchant",
    params: RefundChargeParam,
    responses: {
      200: json(RefundList, "Oldest first."),
      400: INVALID,
      404: NOT_FOUND("charge (or another merchant's)", "charge_not_found"),
    },
  },
];
