import { error, INVALID, json, type Operation } from "../lib/api-operation";
import { body, ErrorBody, InvalidRequest } from "../lib/api-shapes";
import { FundingBooked, Treasury, TreasuryCheckList } from "./responses";
import { FundingBody, TreasuryChecksQuery } from "./routes";

/** A deployment's configuration, not something a request can provoke here. */
const NOT_CONFIGURED = {
  ...error("This deployment takes no payments on chain (`treasury_not_configured`).", "treasury_not_configured"),
  generic: true,
};

/** The treasury reconciliation: the chain's holdings against the ledger's expectation. */
export const TREASURY_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/console/treasury",
    operationId: "getTreasury",
    summary: "Reconcile the treasury now",
    description:
      "Reads the settlement address and every receiving address not swept yet at one block, compares them with what the ledger expects the service to hold, and stores the result as a check (as the cron does; a shortfall that starts an episode sends `treasury.shortfall`).",
    tag: "Console treasury",
    auth: "console",
    responses: {
      200: json(Treasury, "The holdings, the ledger's side, the difference and the status."),
      503: NOT_CONFIGURED,
    },
  },
  {
    method: "post",
    path: "/console/treasury/fundings",
    operationId: "bookTreasuryFunding",
    summary: "Book a funding of the treasury as the operator's float",
    description:
      "Reads the transaction's receipt from the chain and books the sum of its transfers of the token to the settlement address, once per transaction, as the operator's float: from then on the ledger's expectation (`floatBaseUnits`) includes it, so tokens put into the treasury on purpose no longer read as a surplus. The transaction must be mined as deep as a deposit must be (`DEPOSIT_CONFIRMATIONS`). No ledger money moves; the booking is an audit row (`treasury.funding_booked`).",
    tag: "Console treasury",
    auth: "console",
    body: body("TreasuryFundingRequest", FundingBody),
    responses: {
      201: json(FundingBooked, "Booked."),
      400: json(
        [InvalidRequest, ErrorBody],
        "An invalid body (`invalid_request`: `transaction` must be 0x and 64 hex digits); or the transaction carries no transfer of the token to the settlement address: unknown to the node, not mined yet, reverted, or moving the token elsewhere (`no_funding_transfer`).",
        { errors: ["invalid_request", "no_funding_transfer"] },
      ),
      409: error(
        "Booked before (`funding_already_booked`); mined but not yet `DEPOSIT_CONFIRMATIONS` deep (`funding_not_confirmed`: send it again later, with a new `Idempotency-Key` if the first had one); or one of the service's own movements the ledger already counts, a sweep, an x402 settlement or a deposit (`funding_already_counted`).",
        "funding_already_booked",
        "funding_not_confirmed",
        "funding_already_counted",
      ),
      503: NOT_CONFIGURED,
    },
  },
  {
    method: "get",
    path: "/console/treasury/checks",
    operationId: "listTreasuryChecks",
    summary: "The stored treasury checks",
    tag: "Console treasury",
    auth: "console",
    query: TreasuryChecksQuery,
    responses: { 200: json(TreasuryCheckList, "Newest first; `limit` 1-100, default 20."), 400: INVALID },
  },
];
