import { z } from "zod";
import { BaseUnits, Cents, EvmAddress, named, PreviousKeyExpiresAt, prefixed, Timestamp, Usd } from "../lib/api-shapes";

/** Response bodies: Agents, their policies and wallets. */

export const Policy = named(
  "Policy",
  z.strictObject({
    maxPerTransactionUsdCents: z.number().int().positive().nullable(),
    dailyLimitUsdCents: z.number().int().positive().nullable(),
    allowedCategories: z.array(z.string()).nullable(),
    approvalThresholdUsdCents: z.number().int().nonnegative().nullable(),
    allowedX402Hosts: z
      .array(z.string())
      .nullable()
      .describe("Hosts whose x402 paywalls the agent may pay from its wallet (`*` for any); null: none."),
  }),
  "The stored policy: every field present, null meaning no limit.",
);

export const Agent = named(
  "Agent",
  z.strictObject({
    agentId: prefixed("agent"),
    name: z.string(),
    balanceMinor: Cents.describe("The balance in whole cents, rounded down."),
    balanceBaseUnits: BaseUnits.describe("The exact balance in the token's base units (1 cent = 10,000)."),
    currency: Usd,
    policy: Policy,
    depositAddress: EvmAddress.nullable(),
    frozen: z.boolean(),
    frozenReason: z.string().nullable().describe("The reason given with the freeze, if any; null when not frozen."),
    createdAt: Timestamp,
  }),
);

export const AgentKeyRolled = named(
  "AgentKeyRolled",
  z.strictObject({
    agentId: prefixed("agent"),
    apiKey: prefixed("agentKey").describe("Shown exactly once."),
    previousKeyExpiresAt: PreviousKeyExpiresAt,
  }),
);

export const AgentFrozen = named("AgentFrozen", z.strictObject({ agentId: prefixed("agent"), frozen: z.boolean() }));

export const AgentCreated = named(
  "AgentCreated",
  z.strictObject({
    agentId: prefixed("agent"),
    apiKey: prefixed("agentKey").describe("Shown exactly once."),
    policy: Policy,
    depositAddress: EvmAddress.nullable(),
  }),
);

export const AgentList = named("AgentList", z.strictObject({ agents: z.array(Agent) }));

export const PolicySet = named("PolicySet", z.strictObject({ policy: Policy }));

export const CreditApplied = named("CreditApplied", z.strictObject({ balanceMinor: Cents }));

export const Balance = named(
  "Balance",
  z.strictObject({
    agentId: prefixed("agent"),
    balanceMinor: Cents.describe("The balance in whole cents, rounded down."),
    balanceBaseUnits: BaseUnits.describe("The exact balance in the token's base units (1 cent = 10,000)."),
    currency: Usd,
    depositAddress: EvmAddress.nullable(),
    frozen: z
      .boolean()
      .describe(
        "True while an operator has frozen the wallet: every payment is refused (403 `agent_frozen`); reads keep working.",
      ),
  }),
);
