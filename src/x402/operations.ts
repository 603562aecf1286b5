import { Charge } from "../charges/responses";
import { error, INVALID, json, NOT_FOUND, type Operation, X402_HEADERS } from "../lib/api-operation";
import {
  ReceivingAddressReport,
  X402PaymentRequired,
  X402Settled,
  X402Settlement,
  X402SettlementPending,
} from "./responses";
import { ChargeParam, ReceivingQuery, SettlementParam, SettlementQuery, TokenParam } from "./routes";

const PENDING_HEADERS = {
  "Retry-After": "Seconds.",
  Location: "/x402/settlements/{settlementId}: where the outcome can be asked for.",
};

const NOT_CONFIGURED = error(
  "x402 is not configured on this deployment (`x402_not_configured`).",
  "x402_not_configured",
);

/** The settlement status resource, by id and by authorization: one shape, one 404. */
const settlementOperation = (
  path: string,
  operationId: string,
  summary: string,
  input: Pick<Operation, "params" | "query">,
): Operation => ({
  method: "get",
  path,
  operationId,
  summary,
  description:
    "What became of an x402 payment, for a client that lost its answer or got a 202: `pending` until the chain decides, then `settled` (the charge is paid) or `failed` (nothing moved; `errorReason` says why). Ask this rather than pay again. Public: the settlement id is unguessable, and the lookup by authorization needs the payer's address and the nonce it signed.",
  tag: "x402",
  auth: "public",
  ...input,
  responses: {
    200: json(X402Settlement, "The settlement."),
    400: INVALID,
    404: NOT_FOUND("settlement", "settlement_not_found"),
    503: NOT_CONFIGURED,
  },
});

/** x402: paying charges and checkout links on chain, and the receiving addresses. */
export const X402_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/charges/:chargeId/x402",
    operationId: "payChargeX402",
    summary: "Pay a charge by x402",
    description:
      "Without a payment header: 402 with the terms (also base64 in `PAYMENT-REQUIRED`), or 200 with the charge if it is already paid; 409 for a charge made by a merchant's facilitated settlement that failed. With `X-PAYMENT` (or `PAYMENT-SIGNATURE`): verified and settled, 200 with the settlement (also in `X-PAYMENT-RESPONSE` and `PAYMENT-RESPONSE`).",
    tag: "x402",
    auth: "public",
    params: ChargeParam,
    headers: X402_HEADERS,
    responses: {
      200: json([Charge, X402Settled], "The charge, already paid; or the settlement of this payment.", {
        headers: {
          "X-PAYMENT-RESPONSE": "base64 JSON settlement (v1).",
          "PAYMENT-RESPONSE": "base64 JSON settlement (v2).",
        },
      }),
      202: {
        ...json(
          X402SettlementPending,
          "Settlement outcome not known yet: ask the settlement named in `Location` (or send the same payment again) after `Retry-After`.",
        ),
        headers: PENDING_HEADERS,
      },
      402: json(
        X402PaymentRequired,
        "Payment required: the terms; or `Pago inválido` / `Liquidación fallida` with the reason.",
        {
          headers: { "PAYMENT-REQUIRED": "base64 JSON of the x402 version 2 PaymentRequired." },
          errors: ["X-PAYMENT header is required", "Pago inválido", "Liquidación fallida"],
        },
      ),
      404: NOT_FOUND("charge", "charge_not_found"),
      409: error(
        "A charge made by a merchant's facilitated settlement (`POST /x402/facilitator/settle`) is paid by that payment only: while it is pending (its settlement failed) nobody else can pay it (`charge_not_pending`).",
        "charge_not_pending",
      ),
      503: error(
        "x402 is not configured on this deployment (`x402_not_configured`); or the chain or the remote facilitator could not be asked before anything was reserved (`chain_unavailable`, `facilitator_unavailable`, with `Retry-After`: send the same payment again).",
        "x402_not_configured",
        "chain_unavailable",
        "facilitator_unavailable",
      ),
    },
  },
  {
    method: "get",
    path: "/console/x402/receiving-addresses",
    operationId: "listReceivingAddresses",
    summary: "What x402 payments left on the receiving addresses",
    description:
      "Each charge and checkout link offered for x402 has a receiving address of its own (its `payTo`), so an authorization pays only what it was made for. This lists the addresses that were paid, most recently paid first, with what was settled to each and what the chain says each holds now; the totals cover all of them.",
    tag: "x402",
    auth: "console",
    query: ReceivingQuery,
    responses: {
      200: json(ReceivingAddressReport, "The report."),
      400: INVALID,
      503: NOT_CONFIGURED,
    },
  },
  settlementOperation("/x402/settlements/:settlementId", "getX402Settlement", "What became of an x402 payment", {
    params: SettlementParam,
  }),
  settlementOperation("/x402/settlements", "findX402Settlement", "Find an x402 payment by its authorization", {
    query: SettlementQuery,
  }),
  ...(["get", "post"] as const).map(
    (method): Operation => ({
      method,
      path: "/checkout/:token/x402",
      operationId: method === "get" ? "payCheckoutX402Get" : "payCheckoutX402",
      summary:
        method === "get"
          ? "Checkout link x402 terms (or pay, as official clients retry)"
          : "Pay a checkout link by x402",
      description:
        "Each paid call creates a new charge against the link. Official x402 clients retry with their first method, so a GET with a payment header settles exactly as the POST does.",
      tag: "x402",
      auth: "public",
      params: TokenParam,
      headers: X402_HEADERS,
      responses: {
        200: json(X402Settled, "Settled: a new paid charge.", {
          headers: {
            "X-PAYMENT-RESPONSE": "base64 JSON settlement (v1).",
            "PAYMENT-RESPONSE": "base64 JSON settlement (v2).",
          },
        }),
        202: {
          ...json(X402SettlementPending, "Settlement outcome not known yet: ask the settlement named in `Location`."),
          headers: PENDING_HEADERS,
        },
        402: json(X402PaymentRequired, "The terms; or `Pago inválido` / `Liquidación fallida`.", {
          headers: { "PAYMENT-REQUIRED": "base64 JSON of the x402 version 2 PaymentRequired." },
          errors: ["X-PAYMENT header is required", "Pago inválido", "Liquidación fallida"],
        }),
        404: NOT_FOUND("checkout token", "checkout_link_not_found"),
        409: error("The link is disabled (`checkout_link_disabled`).", "checkout_link_disabled"),
        503: error(
          "x402 is not configured (`x402_not_configured`); or the chain or the remote facilitator could not be asked (`chain_unavailable`, `facilitator_unavailable`, with `Retry-After`).",
          "x402_not_configured",
          "chain_unavailable",
          "facilitator_unavailable",
        ),
      },
    }),
  ),
];
