import { z } from "zod";
import { BaseUnits, Cents, EvmAddress, named, Timestamp } from "../lib/api-shapes";
import { wholeCentsOf } from "../lib/money";
import type { TreasuryCheck } from "./check";
import type { Funding } from "./fundings";
import type { StoredCheck } from "./history";

/** Response bodies: the treasury reconciliation. */

const Status = z
  .enum(["balanced", "surplus", "shortfall"])
  .describe(
    "`surplus`: the chain holds more than the ledger expects; `shortfall`: less, even after every pending payout and refund leaves; `balanced` otherwise.",
  );
const Minor = z.number().int();

export const Treasury = named(
  "Treasury",
  z.strictObject({
    asOfBlock: z.number().int().nonnegative().describe("The block every balance was read at."),
    settlementAddress: EvmAddress,
    holdings: z.strictObject({
      settlementBaseUnits: BaseUnits,
      depositAddressesBaseUnits: BaseUnits.describe(
        "Every receiving address not swept yet (agents' deposit addresses, charges' and links' receiving addresses).",
      ),
      totalBaseUnits: BaseUnits,
    }),
    ledger: z.strictObject({
      onChainInMinor: Cents.describe("onChainInBaseUnits in whole cents, rounded down."),
      onChainOutMinor: Cents.describe("onChainOutBaseUnits in whole cents, rounded down."),
      floatBaseUnits: BaseUnits.describe(
        "The operator's float: every funding booked with POST /console/treasury/fundings (tokens put into the treasury on purpose).",
      ),
      expectedBaseUnits: BaseUnits.describe("onChainInBaseUnits - onChainOutBaseUnits + floatBaseUnits."),
      pendingOutMinor: Cents.describe("pendingOutBaseUnits in whole cents, rounded down."),
      agentBalancesMinor: Minor.describe("Every agent's balance, summed exactly, in whole cents rounded down."),
      merchantBalancesMinor: Minor.describe("Every merchant's balance, summed exactly, in whole cents rounded down."),
      inTransitMinor: Minor.describe(
        "Money between two ledger shards (left one, not yet in the other), in whole cents rounded toward zero: internal, so it does not change the verdict.",
      ),
      onChainInBaseUnits: BaseUnits.describe(
        "Every credited deposit (its whole cents: what is below a cent is not credited) and every settled x402 payment (exact: it can be below a cent).",
      ),
      onChainOutBaseUnits: BaseUnits.describe(
        "Every `paid` payout, `succeeded` x402 refund and `settled` agent payment of an x402 paywall.",
      ),
      pendingOutBaseUnits: BaseUnits.describe(
        "Payouts and x402 refunds still `pending`, and agents' x402 payments still `authorized`.",
      ),
    }),
    differenceBaseUnits: BaseUnits.describe("totalBaseUnits - expectedBaseUnits."),
    status: Status,
    outstandingAuthorizations: z
      .strictObject({
        count: z.number().int().nonnegative(),
        totalBaseUnits: BaseUnits,
      })
      .describe(
        "What the treasury has promised and not yet paid: agents' x402 payments still `authorized` (signed from the settlement address, neither used on chain nor released). Part of `pendingOutBaseUnits`.",
      ),
  }),
);

export const TreasuryCheckItem = named(
  "TreasuryCheck",
  z.strictObject({
    at: Timestamp,
    asOfBlock: z.number().int().nonnegative(),
    status: Status,
    differenceBaseUnits: BaseUnits,
    totalBaseUnits: BaseUnits,
    expectedBaseUnits: BaseUnits,
  }),
);

export const TreasuryCheckList = named(
  "TreasuryCheckList",
  z.strictObject({ checks: z.array(TreasuryCheckItem).describe("Newest first.") }),
);

export const TransactionHash = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/)
  .describe("A transaction hash: 0x and 64 hex digits.");

export const FundingBooked = named(
  "TreasuryFundingBooked",
  z.strictObject({
    funding: z.strictObject({
      transaction: TransactionHash.describe("The transaction, lower case."),
      amountBaseUnits: BaseUnits.describe(
        "What the transaction brought to the settlement address: the sum of its transfers of the token there.",
      ),
      bookedAt: Timestamp,
    }),
  }),
);

/** The answer to POST /console/treasury/fundings. */
export const fundingView = (f: Funding) => ({
  funding: { transaction: f.transaction, amountBaseUnits: f.amountBaseUnits.toString(), bookedAt: f.bookedAt },
});

/** The answer to GET /console/treasury. */
export const treasuryView = (c: TreasuryCheck) => ({
  asOfBlock: c.holdings.asOfBlock,
  settlementAddress: c.settlementAddress,
  holdings: {
    settlementBaseUnits: c.holdings.settlementBaseUnits.toString(),
    depositAddressesBaseUnits: c.holdings.depositAddressesBaseUnits.toString(),
    totalBaseUnits: c.holdings.totalBaseUnits.toString(),
  },
  // Each cents figure is its exact total rounded down (a sum of exact amounts, never of rounded ones).
  ledger: {
    onChainInMinor: wholeCentsOf(c.ledger.onChainInBaseUnits),
    onChainOutMinor: wholeCentsOf(c.ledger.onChainOutBaseUnits),
    floatBaseUnits: c.ledger.floatBaseUnits.toString(),
    expectedBaseUnits: c.ledger.expectedBaseUnits.toString(),
    pendingOutMinor: wholeCentsOf(c.ledger.pendingOutBaseUnits),
    agentBalancesMinor: wholeCentsOf(c.ledger.agentBalancesBaseUnits),
    merchantBalancesMinor: wholeCentsOf(c.ledger.merchantBalancesBaseUnits),
    inTransitMinor: wholeCentsOf(c.ledger.inTransitBaseUnits),
    onChainInBaseUnits: c.ledger.onChainInBaseUnits.toString(),
    onChainOutBaseUnits: c.ledger.onChainOutBaseUnits.toString(),
    pendingOutBaseUnits: c.ledger.pendingOutBaseUnits.toString(),
  },
  differenceBaseUnits: c.differenceBaseUnits.toString(),
  status: c.status,
  outstandingAuthorizations: {
    count: Number(c.ledger.outstandingAuthorizations),
    totalBaseUnits: c.ledger.outstandingAuthorizationsBaseUnits.toString(),
  },
});

/** A stored check as listed. */
export const storedCheckView = (c: StoredCheck) => ({
  at: c.at,
  asOfBlock: c.asOfBlock,
  status: c.status,
  differenceBaseUnits: c.differenceBaseUnits,
  totalBaseUnits: c.totalBaseUnits,
  expectedBaseUnits: c.expectedBaseUnits,
});
