import { error, INVALID, json, type Operation } from "../lib/api-operation";
import { Treasury, TreasuryCheckList } from "./responses";
import { TreasuryChecksQuery } from "./routes";

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
      503: {
        ...error("This deployment takes no payments on chain (`treasury_not_configured`).", "treasury_not_configured"),
        // A deployment's configuration, not something a request can provoke here.
        generic: true,
      },
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
