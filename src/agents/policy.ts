import { z } from "zod";
import { type CodeWith, INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { amountMinor } from "../lib/money";

const limit = amountMinor.nullable().optional();

/** The spending policy (docs/api.md, Agents and policies). Absent or null means no limit. */
export const PolicySchema = z
  .object({
    maxPerTransactionUsdCents: limit,
    dailyLimitUsdCents: limit,
    allowedCategories: z.array(z.string().min(1).max(64)).max(100).nullable().optional(),
    approvalThresholdUsdCents: z.number().int().nonnegative().max(100_000_000_000).nullable().optional(),
  })
  .strict();

export type PolicyInput = z.infer<typeof PolicySchema>;

/** The stored and returned form: every field present, null meaning no limit. */
export interface Policy {
  maxPerTransactionUsdCents: number | null;
  dailyLimitUsdCents: number | null;
  allowedCategories: string[] | null;
  approvalThresholdUsdCents: number | null;
}

export function normalizePolicy(input: PolicyInput | undefined): Policy {
  return {
    maxPerTransactionUsdCents: input?.maxPerTransactionUsdCents ?? null,
    dailyLimitUsdCents: input?.dailyLimitUsdCents ?? null,
    allowedCategories: input?.allowedCategories ?? null,
    approvalThresholdUsdCents: input?.approvalThresholdUsdCents ?? null,
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

export interface PaymentContext {
  amountMinor: number;
  merchantCategory: string | null;
  /** Cents already paid from the wallet in the current UTC day. */
  spentTodayMinor: number;
  balanceMinor: number;
  /** A PayLink draw or a granted approval is already a human decision. */
  skipApprovalThreshold: boolean;
}

export type PolicyDecision =
  | { kind: "pay" }
  | { kind: "reject"; reason: CodeWith<402> }
  | { kind: "approval"; reason: string };

/**
 * Evaluates a wallet payment in the order docs/api.md (Agents and policies) gives: hard
 * limits (per-transaction cap, category, daily limit) reject first; then the
 * approval threshold; then the balance.
 */
export function evaluatePolicy(policy: Policy, ctx: PaymentContext): PolicyDecision {
  if (policy.maxPerTransactionUsdCents !== null && ctx.amountMinor > policy.maxPerTransactionUsdCents) {
    return { kind: "reject", reason: POLICY_REASONS.perTransaction };
  }
  if (policy.allowedCategories && policy.allowedCategories.length > 0) {
    if (ctx.merchantCategory === null || !policy.allowedCategories.includes(ctx.merchantCategory)) {
      return { kind: "reject", reason: POLICY_REASONS.category };
    }
  }
  if (policy.dailyLimitUsdCents !== null && ctx.spentTodayMinor + ctx.amountMinor > policy.dailyLimitUsdCents) {
    return { kind: "reject", reason: POLICY_REASONS.daily };
  }
  if (
    !ctx.skipApprovalThreshold &&
    policy.approvalThresholdUsdCents !== null &&
    ctx.amountMinor > policy.approvalThresholdUsdCents
  ) {
    return { kind: "approval", reason: POLICY_REASONS.approval };
  }
  if (ctx.amountMinor > ctx.balanceMinor) return { kind: "reject", reason: POLICY_REASONS.balance };
  return { kind: "pay" };
}
