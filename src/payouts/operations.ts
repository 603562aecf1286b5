import { error, INVALID, json, NOT_FOUND, type Operation, type ResponseSpec } from "../lib/api-operation";
import { body, CredentialNotAllowed } from "../lib/api-shapes";
import { PayoutAddressFlagged } from "../merchants/responses";
import { PayoutCreated, PayoutList, PayoutOne } from "./responses";
import { ConsolePayoutQuery, PayoutBody, PayoutListQuery, PayoutParam } from "./routes";

/** A deployment without the settlement key or a gas key, or a ledger shedding load. */
export const TREASURY_UNAVAILABLE: ResponseSpec = {
  ...error(
    "This deployment sends no money out: it lacks the settlement key or a gas key (`treasury_not_configured`); or the ledger is shedding load (`overloaded`, with `Retry-After`).",
    "treasury_not_configured",
    "overloaded",
  ),
  // A deployment's configuration, not something a request can provoke here.
  generic: true,
};

/** Payouts: a merchant's balance sent on chain to its payout address. */
export const PAYOUT_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/merchant/payouts",
    operationId: "createPayout",
    summary: "Pay out the balance",
    description:
      "Screens the payout address again, then debits the balance and records the payout (`pending`) in one batch; the stablecoin is then sent from the settlement address, at most once, and the payout becomes `paid` (`payout.paid`) or `failed` with the amount back in the balance (`payout.failed`). Without `amountUsdCents` the whole balance is paid out.",
    tag: "Payouts",
    auth: "merchant",
    body: body("PayoutRequest", PayoutBody),
    bodyOptional: true,
    responses: {
      201: json(PayoutCreated, "Debited; the transfer is on its way."),
      400: INVALID,
      403: json(
        [PayoutAddressFlagged, CredentialNotAllowed],
        "The payout address no longer passes screening (nothing debited), or a credential of another kind.",
        { errors: ["payout_address_flagged"] },
      ),
      409: error(
        "No payout address (`payout_address_missing`), or the amount is more than the balance, or the balance is zero (`saldo_insuficiente`). Nothing is debited.",
        "payout_address_missing",
        "saldo_insuficiente",
      ),
      503: TREASURY_UNAVAILABLE,
    },
  },
  {
    method: "get",
    path: "/merchant/payouts",
    operationId: "listPayouts",
    summary: "The merchant's payouts",
    tag: "Payouts",
    auth: "merchant",
    query: PayoutListQuery,
    responses: { 200: json(PayoutList, "Newest first."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/payouts/:payoutId",
    operationId: "getPayout",
    summary: "One payout",
    tag: "Payouts",
    auth: "merchant",
    params: PayoutParam,
    responses: { 200: json(PayoutOne, "The payout."), 400: INVALID, 404: NOT_FOUND("payout", "payout_not_found") },
  },
  {
    method: "get",
    path: "/console/payouts",
    operationId: "listAllPayouts",
    summary: "Payouts of every merchant",
    tag: "Console payouts",
    auth: "console",
    query: ConsolePayoutQuery,
    responses: { 200: json(PayoutList, "Newest first, optionally of one status."), 400: INVALID },
  },
];
