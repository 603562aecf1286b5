import { error, INVALID, json, NOT_FOUND, type Operation, OVERLOADED } from "../lib/api-operation";
import { body, CredentialNotAllowed, ErrorBody } from "../lib/api-shapes";
import { Charge, ChargeList, ChargePaid, PendingApproval } from "./responses";
import { ChargeIdParam, CreateChargeBody } from "./routes";

/** Charges, and paying one from the agent's wallet. */
export const CHARGE_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/merchant/charges",
    operationId: "createCharge",
    summary: "Create a charge",
    description: "Fires `charge.created`.",
    tag: "Charges",
    auth: "merchant",
    body: body("CreateChargeRequest", CreateChargeBody),
    responses: { 201: json(Charge, "The pending charge."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/charges",
    operationId: "listCharges",
    summary: "The merchant's charges",
    description: "The last 100, newest first.",
    tag: "Charges",
    auth: "merchant",
    responses: { 200: json(ChargeList, "Charges.") },
  },
  {
    method: "get",
    path: "/charges/:chargeId",
    operationId: "getCharge",
    summary: "Read a charge",
    description: "The charge id is the capability to read it.",
    tag: "Charges",
    auth: "public",
    params: ChargeIdParam,
    responses: { 200: json(Charge, "The charge."), 404: NOT_FOUND("charge", "charge_not_found") },
  },
  {
    method: "post",
    path: "/charges/:chargeId/pay",
    operationId: "payCharge",
    summary: "Pay a charge from the agent's wallet",
    description:
      "The agent's policy decides: hard limits (per-transaction cap, category, daily limit) reject with 402; over the approval threshold the payment is held for a human (402 `pendingApproval`, nothing charged); then the balance.",
    tag: "Charges",
    auth: "agent",
    params: ChargeIdParam,
    responses: {
      200: json(ChargePaid, "Paid."),
      402: json(
        [PendingApproval, ErrorBody],
        "Held for a human (`pendingApproval`), or refused by the policy (`excede_tope_por_transaccion`, `categoria_no_permitida`, `excede_limite_diario`, `saldo_insuficiente`).",
        {
          errors: [
            "excede_tope_por_transaccion",
            "categoria_no_permitida",
            "excede_limite_diario",
            "saldo_insuficiente",
          ],
        },
      ),
      403: json(
        [ErrorBody, CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`): an operator stopped its payments; or a credential of another kind.",
        { errors: ["agent_frozen"] },
      ),
      404: NOT_FOUND("charge", "charge_not_found"),
      409: error(
        "The charge is not pending (`charge_not_pending`), or its amount is not whole cents and it lives in another ledger shard than the agent (`cross_shard_amount_not_whole_cents`; nothing is charged).",
        "charge_not_pending",
        "cross_shard_amount_not_whole_cents",
      ),
      503: OVERLOADED,
    },
  },
];
