import { error, INVALID, json, type Operation, OVERLOADED } from "../lib/api-operation";
import { body, CredentialNotAllowed, ErrorBody } from "../lib/api-shapes";
import { BUDGET_LEFT_PATTERN } from "../lib/error-codes";
import { PaylinkAccepted, PaylinkCreated, PaylinkDrawn, PaylinkPublic } from "./responses";
import { CodeParam, CreateBody, DrawBody } from "./routes";

/** PayLinks: created by a merchant, accepted by an agent, drawn on by the merchant. */
export const PAYLINK_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/merchant/paylinks",
    operationId: "createPaylink",
    summary: "Create a PayLink",
    tag: "PayLinks",
    auth: "merchant",
    body: body("CreatePaylinkRequest", CreateBody),
    responses: { 201: json(PaylinkCreated, "The PayLink, with `acceptUrl`."), 400: INVALID },
  },
  {
    method: "get",
    path: "/pl/:code",
    operationId: "getPaylink",
    summary: "View a PayLink",
    tag: "PayLinks",
    auth: "public",
    params: CodeParam,
    responses: {
      200: json(PaylinkPublic, "The public view."),
      404: error("`paylink_not_found`.", "paylink_not_found"),
    },
  },
  {
    method: "post",
    path: "/pl/:code/accept",
    operationId: "acceptPaylink",
    summary: "Accept a PayLink",
    description: "Idempotent per (PayLink, agent); fires `paylink.accepted` to the merchant's webhooks.",
    tag: "PayLinks",
    auth: "agent",
    params: CodeParam,
    responses: {
      200: json(PaylinkAccepted, "The grant and the PayLink as this agent sees it."),
      403: json(
        [ErrorBody, CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`): an operator stopped its payments; or a credential of another kind.",
        { errors: ["agent_frozen"] },
      ),
      404: error("`paylink_not_found`.", "paylink_not_found"),
      409: error("`paylink_expired`.", "paylink_expired"),
    },
  },
  {
    method: "post",
    path: "/merchant/paylinks/:code/charge",
    operationId: "drawPaylink",
    summary: "Draw on an agent's PayLink grant",
    description:
      "The remaining budget is enforced before the agent wallet is touched; a refused draw leaves no charge.",
    tag: "PayLinks",
    auth: "merchant",
    params: CodeParam,
    body: body("DrawPaylinkRequest", DrawBody),
    responses: {
      200: json(PaylinkDrawn, "Paid, with the grant's figures."),
      400: INVALID,
      402: error(
        "`excede_presupuesto_restante_<N>` (N = cents left), `excede_tope_por_uso`, or the agent's hard policy limits.",
        BUDGET_LEFT_PATTERN,
        "excede_tope_por_uso",
        "excede_tope_por_transaccion",
        "categoria_no_permitida",
        "excede_limite_diario",
        "saldo_insuficiente",
      ),
      404: error("`paylink_not_found` (wrong code, or another merchant's).", "paylink_not_found"),
      409: error(
        "`paylink_exhausted`, `max_uses_alcanzado`, `paylink_expired` or `sin_grant_del_agente`; or the agent is frozen (`agent_frozen`).",
        "paylink_exhausted",
        "max_uses_alcanzado",
        "paylink_expired",
        "sin_grant_del_agente",
        "agent_frozen",
      ),
      503: OVERLOADED,
    },
  },
];
