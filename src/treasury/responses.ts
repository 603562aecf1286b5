import { z } from "zod";
import { BaseUnits, Cents, EvmAddress, named, Timestamp } from "../lib/api-shapes";
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
      onChainInMinor: Cents.describe("Every credited deposit and every settled x402 payment."),
      onChainOutMinor: Cents.describe("Every `paid` payout and `succeeded` x402 refund."),
      floatBaseUnits: BaseUnits.describe(
        "The operator's float: every funding booked with POST /console/treasury/fundings (tokens put into the treasury on purpose).",
      ),
      expectedBaseUnits: BaseUnits.describe("(onChainInMinor - onChainOutMinor) x 10,000 + floatBaseUnits."),
      pendingOutMinor: Cents.describe("Payouts and x402 refunds still `pending`."),
      agentBalancesMinor: Minor,
      merchantBalancesMinor: Minor,
      inTransitMinor: Minor.describe(
        "Money between two ledger shards (left one, not yet in the other): internal, so it does not change the verdict.",
      ),
    }),
    differenceBaseUnits: BaseUnits.describe("totalBaseUnits - expectedBaseUnits."),
    status: Status,
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
  ledger: {
    onChainInMinor: c.ledger.onChainInMinor,
    onChainOutMinor: c.ledger.onChainOutMinor,
    floatBaseUnits: c.ledger.floatBaseUnits.toString(),
    expectedBaseUnits: c.ledger.expectedBaseUnits.toString(),
    pendingOutMinor: c.ledger.pendingOutMinor,
    agentBalancesMinor: c.ledger.agentBalancesMinor,
    merchantBalancesMinor: c.ledger.merchantBalancesMinor,
    inTransitMinor: c.ledger.inTransitMinor,
  },
  differenceBaseUnits: c.differenceBaseUnits.toString(),
  status: c.status,
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
