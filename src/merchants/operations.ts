import { RollKeyBody } from "../keys/roll";
import { error, INVALID, json, type Operation, OVERLOADED } from "../lib/api-operation";
import { body, CredentialNotAllowed } from "../lib/api-shapes";
import {
  ConsoleMerchantList,
  MerchantKeyRolled,
  MerchantMe,
  MerchantRegistered,
  PayoutAddressFlagged,
  PayoutAddressSet,
} from "./responses";
import { ListQuery, MerchantParam, PayoutAddressBody, RegisterBody } from "./routes";

/** Merchants: registration, their own record, payout address, key rolls and the console list. */
export const MERCHANT_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/merchants",
    operationId: "registerMerchant",
    summary: "Register a merchant",
    description: "Returns the merchant's API key, shown exactly once.",
    tag: "Merchants",
    auth: "console",
    body: body("RegisterMerchantRequest", RegisterBody),
    responses: { 201: json(MerchantRegistered, "Registered."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/me",
    operationId: "getMerchantMe",
    summary: "The merchant's own record",
    tag: "Merchants",
    auth: "merchant",
    responses: { 200: json(MerchantMe, "The merchant.") },
  },
  {
    method: "put",
    path: "/merchant/payout-address",
    operationId: "setPayoutAddress",
    summary: "Set the payout address",
    description: "The address is screened (KYT) first; a flagged address is refused and not stored.",
    tag: "Merchants",
    auth: "merchant",
    body: body("PayoutAddressRequest", PayoutAddressBody),
    responses: {
      200: json(PayoutAddressSet, "Stored, with the screening result."),
      400: INVALID,
      403: json(
        [PayoutAddressFlagged, CredentialNotAllowed],
        "Flagged by screening (body includes `verdict`), or a credential of another kind.",
        { errors: ["payout_address_flagged"] },
      ),
    },
  },
  {
    method: "post",
    path: "/console/merchants/:merchantId/keys",
    operationId: "rollMerchantKey",
    summary: "Roll a merchant's API key",
    description:
      "A new `sk_mch_` key, shown once. The key it replaces keeps working for `graceSeconds` (default 86,400; 0 ends it at once), then answers 401; at most two keys work at a time. An ended key stops working everywhere within 5 seconds. Written to the audit chain with the console user.",
    tag: "Console merchants",
    auth: "console",
    params: MerchantParam,
    body: body("RollKeyRequest", RollKeyBody),
    bodyOptional: true,
    responses: {
      201: json(MerchantKeyRolled, "The new key, shown once."),
      400: INVALID,
      404: error("`merchant_not_found`.", "merchant_not_found"),
      503: OVERLOADED,
    },
  },
  {
    method: "get",
    path: "/console/merchants",
    operationId: "listMerchants",
    summary: "List merchants",
    tag: "Console merchants",
    auth: "console",
    query: ListQuery,
    responses: { 200: json(ConsoleMerchantList, "Merchants, newest first."), 400: INVALID },
  },
];
