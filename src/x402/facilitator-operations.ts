import { error, INVALID, json, type Operation } from "../lib/api-operation";
import {
  X402DiscoveryList,
  X402FacilitatorTerms,
  X402MerchantResources,
  X402SettleAnswer,
  X402Supported,
  X402VerifyAnswer,
} from "./facilitator-responses";
import { DiscoveryQuery, FacilitatorBody, MerchantResourcesQuery } from "./facilitator-routes";

const NOT_CONFIGURED = error(
  "x402 is not configured on this deployment (`x402_not_configured`).",
  "x402_not_configured",
);

const facilitatorCall = (action: "verify" | "settle"): Operation => ({
  method: "post",
  path: `/x402/facilitator/${action}`,
  operationId: action === "verify" ? "verifyX402Facilitated" : "settleX402Facilitated",
  summary:
    action === "verify"
      ? "Verify a payment for the merchant's own x402 route"
      : "Settle a payment for the merchant's own x402 route",
  description:
    action === "verify"
      ? "The x402 facilitator `verify`, as the official middlewares call it (`@x402/core`'s HTTPFacilitatorClient for version 2, `x402`'s useFacilitator for version 1), with the merchant key through their auth-header option. The requirements' `payTo` must be the merchant's own address (`GET /merchant/x402/facilitator`). Checks the signature, amount, asset, window and, on chain, the nonce and balance. Changes nothing. A refusal is 200 with `isValid: false` and a reason code of the protocol's packages."
      : "The x402 facilitator `settle`. Exactly once per authorization (payer and nonce): the same payload asked again, also at once, answers the first outcome with the same `transaction` and credits nothing more. A settled payment is a charge of the merchant, created paid (`method` `x402`, `reference` the transaction, `resource` the paid URL), with `charge.succeeded`, its receipt and evidence. A refusal is 200 with `success: false`; `settlement_pending` (version 2) means the outcome is not known yet: ask again.",
  tag: "x402",
  auth: "merchant",
  body: FacilitatorBody,
  responses: {
    200: json(action === "verify" ? X402VerifyAnswer : X402SettleAnswer, "The facilitator's answer."),
    400: INVALID,
    503: NOT_CONFIGURED,
  },
});

/** The service as the x402 facilitator of merchants' own routes. */
export const FACILITATOR_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/merchant/x402/facilitator",
    operationId: "getX402FacilitatorTerms",
    summary: "What a merchant's x402 middleware needs to use the service as its facilitator",
    description:
      "The facilitator URL, the merchant's own receiving address (`payTo`, one per merchant, assigned on the first ask), the network, the token and its EIP-712 domain.",
    tag: "x402",
    auth: "merchant",
    responses: { 200: json(X402FacilitatorTerms, "The terms."), 503: NOT_CONFIGURED },
  },
  {
    method: "get",
    path: "/merchant/x402/resources",
    operationId: "listMerchantX402Resources",
    summary: "The merchant's own listed x402 resources",
    description:
      "The merchant's routes that declared the `bazaar` discovery extension and were paid through the service, with when each was listed and last paid.",
    tag: "x402",
    auth: "merchant",
    query: MerchantResourcesQuery,
    responses: { 200: json(X402MerchantResources, "The resources."), 400: INVALID },
  },
  {
    method: "get",
    path: "/x402/facilitator/supported",
    operationId: "getX402FacilitatorSupported",
    summary: "The x402 facilitator's supported kinds",
    tag: "x402",
    auth: "merchant",
    responses: { 200: json(X402Supported, "The supported kinds."), 503: NOT_CONFIGURED },
  },
  facilitatorCall("verify"),
  facilitatorCall("settle"),
  {
    method: "get",
    path: "/x402/facilitator/discovery/resources",
    operationId: "listX402DiscoveryResources",
    summary: "The x402 discovery list",
    description:
      "Public. Merchants' resources that declared the `bazaar` extension, listed once a payment for them settled here, most recently listed first; `limit` (default 20, at most 100), `offset`, and `type` to filter.",
    tag: "x402",
    auth: "public",
    query: DiscoveryQuery,
    responses: { 200: json(X402DiscoveryList, "The list."), 400: INVALID },
  },
];
