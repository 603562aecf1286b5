import { PendingApproval } from "../charges/responses";
import { error, INVALID, json, NOT_FOUND, type Operation, OVERLOADED } from "../lib/api-operation";
import { body, CredentialNotAllowed, ErrorBody } from "../lib/api-shapes";
import { CheckoutLink, CheckoutLinkCreated, CheckoutLinkList, CheckoutLinkPublic, CheckoutPaid } from "./responses";
import { CreateBody, ListQuery, PatchBody, TokenParam } from "./routes";

/** Checkout links. */
export const CHECKOUT_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/merchant/checkout",
    operationId: "createCheckoutLink",
    summary: "Create a checkout link",
    tag: "Checkout links",
    auth: "merchant",
    body: body("CreateCheckoutLinkRequest", CreateBody),
    responses: { 201: json(CheckoutLinkCreated, "The link; counters start at 0."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/checkout-links",
    operationId: "listCheckoutLinks",
    summary: "The merchant's checkout links",
    tag: "Checkout links",
    auth: "merchant",
    query: ListQuery,
    responses: { 200: json(CheckoutLinkList, "Links, newest first, and the total."), 400: INVALID },
  },
  {
    method: "patch",
    path: "/merchant/checkout-links/:token",
    operationId: "setCheckoutLinkActive",
    summary: "Disable or enable a checkout link",
    tag: "Checkout links",
    auth: "merchant",
    params: TokenParam,
    body: body("SetCheckoutLinkActiveRequest", PatchBody),
    responses: {
      200: json(CheckoutLink, "The link."),
      400: INVALID,
      404: NOT_FOUND("checkout token", "checkout_link_not_found"),
    },
  },
  {
    method: "get",
    path: "/checkout/:token",
    operationId: "getCheckoutLink",
    summary: "View a checkout link",
    description: "Every call counts a visit, a disabled link's too.",
    tag: "Checkout links",
    auth: "public",
    params: TokenParam,
    responses: {
      200: json(CheckoutLinkPublic, "The public view of an active link."),
      404: NOT_FOUND("checkout token", "checkout_link_not_found"),
      409: error("The link is disabled (`checkout_link_disabled`).", "checkout_link_disabled"),
    },
  },
  {
    method: "post",
    path: "/checkout/:token/pay",
    operationId: "payCheckoutLink",
    summary: "Pay a checkout link from the agent's wallet",
    description: "Creates a new charge against the link and pays it, under the agent's policy.",
    tag: "Checkout links",
    auth: "agent",
    params: TokenParam,
    responses: {
      200: json(CheckoutPaid, "Paid: the agent's new charge."),
      402: json([PendingApproval, ErrorBody], "Held for a human (`pendingApproval`), or refused by the policy.", {
        errors: ["excede_tope_por_transaccion", "categoria_no_permitida", "excede_limite_diario", "saldo_insuficiente"],
      }),
      403: json(
        [ErrorBody, CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`): an operator stopped its payments; or a credential of another kind.",
        { errors: ["agent_frozen"] },
      ),
      404: NOT_FOUND("checkout token", "checkout_link_not_found"),
      409: error("The link is disabled (`checkout_link_disabled`).", "checkout_link_disabled"),
      503: OVERLOADED,
    },
  },
];
