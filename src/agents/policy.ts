import { z } from "zod";
import { type CodeWith, INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { amountMinor, centsToUsdcUnits } from "../lib/money";

const limit = amountMinor.nullable().optional();

/** A host name an agent may pay x402 paywalls on (lower case, no port), or `*` for any. */
const X402Host = z
  .string()
  .max(253)
  .regex(/^(\*|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)$/, "a lower-case host name, or *");

/** The spending policy (docs/api.md, Agents and policies). Absent or null means no limit. */
export const PolicySchema = z
  .object({
    maxPerTransactionUsdCents: limit,
    dailyLimitUsdCents: limit,
    allowedCategories: z.array(z.string().min(1).max(64)).max(100).nullable().optional(),
    approvalThresholdUsdCents: z.number().int().nonnegative().max(100_000_000_000).nullable().optional(),
    allowedX402Hosts: z.array(X402Host).min(1).max(100).nullable().optional(),
  })
  .strict();

export type PolicyInput = z.infer<typeof PolicySchema>;

/** The stored and returned form: every field present, null meaning no limit. */
export interface Policy {
  maxPerTransactionUsdCents: number | null;
  dailyLimitUsdCents: number | null;
  allowedCategories: string[] | null;
  approvalThresholdUsdCents: number | null;
  /** Hosts whose x402 paywalls the agent may pay from its wallet; null: none (outbound x402 is off). */
  allowedX402Hosts: string[] | null;
}

export function normalizePolicy(input: PolicyInput | undefined): Policy {
  return {
    maxPerTransactionUsdCents: input?.maxPerTransactionUsdCents ?? null,
    dailyLimitUsdCents: input?.dailyLimitUsdCents ?? null,
    allowedCategories: input?.allowedCategories ?? null,
    approvalThresholdUsdCents: input?.approvalThresholdUsdCents ?? null,
    allowedX402Hosts: input?.allowedX402Hosts ?? null,
  };
}

export const parseStoredPolicy = (json: string): Policy => normalizePolicy(PolicySchema.parse(JSON.parse(json)));

/** Stable reasons a policy gives; they are the `error` (402) or the approval `reason`. */
export const POLICY_REASONS = {
  perTransaction: "excede_tope_por_transaccion",
  category: "categoria_no_permitida",
  daily: "excede_limite_diario",
  balance: INSUFFICIENT_BALANCE,
  approval: "requiere_aprobacion_humana",
} as const;

/** A payment as the policy sees it, every figure exact in the token's base units (1 cent = 10,000). */
export interface PaymentContext {
  amountBaseUnits: bigint;
  merchantCategory: string | null;
  /** What the wallet already paid in the current UTC day. */
  spentTodayBaseUnits: bigint;
  balanceBaseUnits: bigint;
  /** A PayLink draw or a granted approval is already a human decision. */
  skipApprovalThreshold: boolean;
}

export type PolicyDecision =
  | { kind: "pay" }
  | { kind: "reject"; reason: CodeWith<402> }
  | { kind: "approval"; reason: string };

/** A limit stated in cents, as the base units it allows; null stays no limit. */
const exactLimit = (cents: number | null): bigint | null => (cents === null ? null : centsToUsdcUnits(cents));

/**
 * Evaluates a wallet payment in the order docs/api.md (Agents and policies) gives: hard
 * limits (per-transaction cap, category, daily limit) reject first; then the
 * approval threshold; then the balance. Limits are stated in cents and compared
 * with the exact amounts: a cap of 1 cent allows 10,000 base units, not 10,001.
 */
export function evaluatePolicy(policy: Policy, ctx: PaymentContext): PolicyDecision {
  const amount = ctx.amountBaseUnits;
  const maxPerTransaction = exactLimit(policy.maxPerTransactionUsdCents);
  if (maxPerTransaction !== null && amount > maxPerTransaction) {
    return { kind: "reject", reason: POLICY_REASONS.perTransaction };
  }
  if (policy.allowedCategories && policy.allowedCategories.length > 0) {
    if (ctx.merchantCategory === null || !policy.allowedCategories.includes(ctx.merchantCategory)) {
      return { kind: "reject", reason: POLICY_REASONS.category };
    }
  }
  const daily = exactLimit(policy.dailyLimitUsdCents);
  if (daily !== null && ctx.spentTodayBaseUnits + amount > daily) {
    return { kind: "reject", reason: POLICY_REASONS.daily };
  }
  const threshold = exactLimit(policy.approvalThresholdUsdCents);
  if (!ctx.skipApprovalThreshold && threshold !== null && amount > threshold) {
    return { kind: "approval", reason: POLICY_REASONS.approval };
  }
  if (amount > ctx.balanceBaseUnits) return { kind: "reject", reason: POLICY_REASONS.balance };
  return { kind: "pay" };
}

/** Whether the policy lets the agent pay an x402 paywall at `url`: its host named, or `*`. */
export function x402HostAllowed(policy: Policy, url: string): boolean {
  const hosts = policy.allowedX402Hosts;
  if (!hosts) return false;
  const host = new URL(url).hostname.toLowerCase();
  return hosts.includes("*") || hosts.includes(host);
}
