import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  evaluatePolicy,
  normalizePolicy,
  type PaymentContext,
  POLICY_REASONS,
  type Policy,
  PolicySchema,
} from "../../src/agents/policy";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { SEED } from "../helpers/seed";

const policy = (p: Partial<Policy> = {}): Policy => normalizePolicy(p);
/** The cases below state their figures in whole cents; the policy takes them exact (cents x 10,000 base units). */
interface CentsContext {
  amountMinor: number;
  merchantCategory: string | null;
  spentTodayMinor: number;
  balanceMinor: number;
  skipApprovalThreshold: boolean;
}
const exact = (c: CentsContext): PaymentContext => ({
  amountBaseUnits: BigInt(c.amountMinor) * 10_000n,
  merchantCategory: c.merchantCategory,
  spentTodayBaseUnits: BigInt(c.spentTodayMinor) * 10_000n,
  balanceBaseUnits: BigInt(c.balanceMinor) * 10_000n,
  skipApprovalThreshold: c.skipApprovalThreshold,
});
const centsCtx = (c: Partial<CentsContext> = {}): CentsContext => ({
  amountMinor: 100,
  merchantCategory: null,
  spentTodayMinor: 0,
  balanceMinor: 1_000_000,
  skipApprovalThreshold: false,
  ...c,
});
const ctx = (c: Partial<CentsContext> = {}): PaymentContext => exact(centsCtx(c));

/** Pays and expects a 402 refusal with `error`, with no money moved. */
async function expectRefusal(agentKey: string, merchantKey: string, chargeId: string, error: string) {
  const before = await balanceOf(agentKey);
  const merchantBefore = await merchantBalance(merchantKey);
  const res = await payCharge(agentKey, chargeId);
  expect(res.status).toBe(402);
  expect(res.body).toEqual({ error });
  expect(await balanceOf(agentKey)).toBe(before);
  expect(await merchantBalance(merchantKey)).toBe(merchantBefore);
  expect((await api("GET", `/charges/${chargeId}`)).body.status).toBe("pending");
}

async function expectHeld(agentKey: string, chargeId: string) {
  const before = await balanceOf(agentKey);
  const res = await payCharge(agentKey, chargeId);
  expect(res.status).toBe(402);
  expect(res.body.pendingApproval).toBe(true);
  expect(res.body.reason).toBe("requiere_aprobacion_humana");
  expect(res.body.approvalId).toMatch(/^apr_/);
  expect(res.body.charge.status).toBe("pending");
  expect(await balanceOf(agentKey)).toBe(before);
  return res.body as { approvalId: string };
}

async function expectPaid(agentKey: string, chargeId: string) {
  const res = await payCharge(agentKey, chargeId);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.charge.status).toBe("paid");
  return res;
}

describe("policy through the API: evaluation order", () => {
  it("a payment over both the per-tx cap and the approval threshold is rejected, not held", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({
      credit: 100_000,
      policy: { maxPerTransactionUsdCents: 1000, approvalThresholdUsdCents: 500 },
    });
    const charge = await createCharge(merchant.apiKey, 1500);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "excede_tope_por_transaccion");
    // Between threshold and cap it is held instead.
    const held = await createCharge(merchant.apiKey, 800);
    await expectHeld(agent.apiKey, held.chargeId);
  });

  it("a category refusal wins over the approval threshold", async () => {
    const merchant = await createMerchant({ category: "travel" });
    const agent = await createAgent({
      credit: 100_000,
      policy: { allowedCategories: ["data"], approvalThresholdUsdCents: 10 },
    });
    const charge = await createCharge(merchant.apiKey, 5000);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "categoria_no_permitida");
  });

  it("a daily-limit refusal wins over the approval threshold", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({
      credit: 100_000,
      policy: { dailyLimitUsdCents: 1000, approvalThresholdUsdCents: 10 },
    });
    const charge = await createCharge(merchant.apiKey, 1001);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "excede_limite_diario");
  });

  it("hard limits are checked before the balance", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 100, policy: { maxPerTransactionUsdCents: 500 } });
    const charge = await createCharge(merchant.apiKey, 600);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "excede_tope_por_transaccion");
  });

  it("over the threshold AND over the balance is held for approval, not rejected for balance", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 100, policy: { approvalThresholdUsdCents: 500 } });
    const charge = await createCharge(merchant.apiKey, 1000);
    await expectHeld(agent.apiKey, charge.chargeId);
  });

  it("under the threshold but over the balance is 402 saldo_insuficiente", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 100, policy: { approvalThresholdUsdCents: 500 } });
    const charge = await createCharge(merchant.apiKey, 400);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "saldo_insuficiente");
  });

  it("a balance exactly equal to the amount pays and leaves zero", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 400 });
    const charge = await createCharge(merchant.apiKey, 400);
    await expectPaid(agent.apiKey, charge.chargeId);
    expect(await balanceOf(agent.apiKey)).toBe(0);
  });
});

describe("policy through the API: per-transaction cap", () => {
  it("equal to the cap passes, one cent over fails", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { maxPerTransactionUsdCents: 500 } });
    const atCap = await createCharge(merchant.apiKey, 500);
    await expectPaid(agent.apiKey, atCap.chargeId);
    const over = await createCharge(merchant.apiKey, 501);
    await expectRefusal(agent.apiKey, merchant.apiKey, over.chargeId, "excede_tope_por_transaccion");
  });
});

describe("policy through the API: category allowlist", () => {
  it("a merchant whose category is listed is allowed", async () => {
    const merchant = await createMerchant({ category: "compute" });
    const agent = await createAgent({ credit: 10_000, policy: { allowedCategories: ["data", "compute"] } });
    const charge = await createCharge(merchant.apiKey, 100);
    await expectPaid(agent.apiKey, charge.chargeId);
  });

  it("a merchant whose category is not listed is denied", async () => {
    const merchant = await createMerchant({ category: "food" });
    const agent = await createAgent({ credit: 10_000, policy: { allowedCategories: ["data", "compute"] } });
    const charge = await createCharge(merchant.apiKey, 100);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "categoria_no_permitida");
  });

  it("matching is exact (a different letter case is not listed)", async () => {
    const merchant = await createMerchant({ category: "Data" });
    const agent = await createAgent({ credit: 10_000, policy: { allowedCategories: ["data"] } });
    const charge = await createCharge(merchant.apiKey, 100);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "categoria_no_permitida");
  });

  it("a merchant without a category is denied when the list is non-empty", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { allowedCategories: ["data"] } });
    const charge = await createCharge(merchant.apiKey, 100);
    await expectRefusal(agent.apiKey, merchant.apiKey, charge.chargeId, "categoria_no_permitida");
  });

  it("an empty list means no restriction, for merchants with and without a category", async () => {
    const withCategory = await createMerchant({ category: "anything" });
    const without = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { allowedCategories: [] } });
    await expectPaid(agent.apiKey, (await createCharge(withCategory.apiKey, 100)).chargeId);
    await expectPaid(agent.apiKey, (await createCharge(without.apiKey, 100)).chargeId);
  });

  it("the merchant's category is stored at registration and listed for the console", async () => {
    const merchant = await createMerchant({ category: "research" });
    const res = await api("GET", "/console/merchants", { token: await consoleToken() });
    expect(res.status).toBe(200);
    const found = res.body.merchants.find((m: { id: string }) => m.id === merchant.merchantId);
    expect(found.category).toBe("research");
  });
});

describe("policy through the API: daily limit", () => {
  it("counts today's payments including this one: equal to the limit passes, one cent over fails", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { dailyLimitUsdCents: 1000 } });
    await expectPaid(agent.apiKey, (await createCharge(merchant.apiKey, 600)).chargeId);
    // 600 + 401 > 1000
    await expectRefusal(
      agent.apiKey,
      merchant.apiKey,
      (await createCharge(merchant.apiKey, 401)).chargeId,
      "excede_limite_diario",
    );
    // 600 + 400 == 1000 passes
    await expectPaid(agent.apiKey, (await createCharge(merchant.apiKey, 400)).chargeId);
    // the day is used up: even one cent fails
    await expectRefusal(
      agent.apiKey,
      merchant.apiKey,
      (await createCharge(merchant.apiKey, 1)).chargeId,
      "excede_limite_diario",
    );
    expect(await balanceOf(agent.apiKey)).toBe(9000);
  });

  it("a single payment equal to the limit passes and one over it fails", async () => {
    const merchant = await createMerchant();
    const a = await createAgent({ credit: 10_000, policy: { dailyLimitUsdCents: 1000 } });
    await expectPaid(a.apiKey, (await createCharge(merchant.apiKey, 1000)).chargeId);
    const b = await createAgent({ credit: 10_000, policy: { dailyLimitUsdCents: 1000 } });
    await expectRefusal(
      b.apiKey,
      merchant.apiKey,
      (await createCharge(merchant.apiKey, 1001)).chargeId,
      "excede_limite_diario",
    );
  });

  it("refused and held payments do not count toward the day", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({
      credit: 10_000,
      policy: { dailyLimitUsdCents: 1000, approvalThresholdUsdCents: 700 },
    });
    await expectHeld(agent.apiKey, (await createCharge(merchant.apiKey, 800)).chargeId);
    await expectRefusal(
      agent.apiKey,
      merchant.apiKey,
      (await createCharge(merchant.apiKey, 1200)).chargeId,
      "excede_limite_diario",
    );
    // Nothing was spent, so 700 + 300 fit.
    await expectPaid(agent.apiKey, (await createCharge(merchant.apiKey, 700)).chargeId);
    await expectPaid(agent.apiKey, (await createCharge(merchant.apiKey, 300)).chargeId);
  });

  it("is per agent: another agent's spending does not count", async () => {
    const merchant = await createMerchant();
    const a = await createAgent({ credit: 10_000, policy: { dailyLimitUsdCents: 500 } });
    const b = await createAgent({ credit: 10_000, policy: { dailyLimitUsdCents: 500 } });
    await expectPaid(a.apiKey, (await createCharge(merchant.apiKey, 500)).chargeId);
    await expectPaid(b.apiKey, (await createCharge(merchant.apiKey, 500)).chargeId);
  });
});

describe("policy through the API: approval threshold", () => {
  it("equal to the threshold pays, one cent above is held", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 500 } });
    await expectPaid(agent.apiKey, (await createCharge(merchant.apiKey, 500)).chargeId);
    await expectHeld(agent.apiKey, (await createCharge(merchant.apiKey, 501)).chargeId);
    expect(await balanceOf(agent.apiKey)).toBe(9500);
  });

  it("a threshold of 0 holds every payment", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 0 } });
    await expectHeld(agent.apiKey, (await createCharge(merchant.apiKey, 1)).chargeId);
  });
});

describe("evaluatePolicy (unit)", () => {
  it("no limits: pays when the balance covers the amount", () => {
    expect(evaluatePolicy(policy(), ctx({ amountMinor: 500, balanceMinor: 500 }))).toEqual({ kind: "pay" });
  });

  it("no limits: rejects for balance when it does not", () => {
    expect(evaluatePolicy(policy(), ctx({ amountMinor: 501, balanceMinor: 500 }))).toEqual({
      kind: "reject",
      reason: "saldo_insuficiente",
    });
  });

  it("per-transaction cap boundary", () => {
    const p = policy({ maxPerTransactionUsdCents: 500 });
    expect(evaluatePolicy(p, ctx({ amountMinor: 500 }))).toEqual({ kind: "pay" });
    expect(evaluatePolicy(p, ctx({ amountMinor: 501 }))).toEqual({
      kind: "reject",
      reason: "excede_tope_por_transaccion",
    });
  });

  it("category allowlist", () => {
    const p = policy({ allowedCategories: ["data"] });
    expect(evaluatePolicy(p, ctx({ merchantCategory: "data" }))).toEqual({ kind: "pay" });
    expect(evaluatePolicy(p, ctx({ merchantCategory: "food" }))).toEqual({
      kind: "reject",
      reason: "categoria_no_permitida",
    });
    expect(evaluatePolicy(p, ctx({ merchantCategory: null }))).toEqual({
      kind: "reject",
      reason: "categoria_no_permitida",
    });
    expect(evaluatePolicy(policy({ allowedCategories: [] }), ctx({ merchantCategory: null }))).toEqual({ kind: "pay" });
    expect(evaluatePolicy(policy({ allowedCategories: null }), ctx({ merchantCategory: "x" }))).toEqual({
      kind: "pay",
    });
  });

  it("daily limit includes this payment", () => {
    const p = policy({ dailyLimitUsdCents: 1000 });
    expect(evaluatePolicy(p, ctx({ spentTodayMinor: 600, amountMinor: 400 }))).toEqual({ kind: "pay" });
    expect(evaluatePolicy(p, ctx({ spentTodayMinor: 600, amountMinor: 401 }))).toEqual({
      kind: "reject",
      reason: "excede_limite_diario",
    });
    expect(evaluatePolicy(p, ctx({ spentTodayMinor: 1000, amountMinor: 1 }))).toEqual({
      kind: "reject",
      reason: "excede_limite_diario",
    });
  });

  it("approval threshold boundary, and skipped for pre-authorized payments", () => {
    const p = policy({ approvalThresholdUsdCents: 500 });
    expect(evaluatePolicy(p, ctx({ amountMinor: 500 }))).toEqual({ kind: "pay" });
    expect(evaluatePolicy(p, ctx({ amountMinor: 501 }))).toEqual({
      kind: "approval",
      reason: "requiere_aprobacion_humana",
    });
    expect(evaluatePolicy(p, ctx({ amountMinor: 501, skipApprovalThreshold: true }))).toEqual({ kind: "pay" });
  });

  it("skipping the threshold does not skip hard limits or the balance", () => {
    const skip = { skipApprovalThreshold: true };
    expect(evaluatePolicy(policy({ maxPerTransactionUsdCents: 10 }), ctx({ ...skip, amountMinor: 11 }))).toEqual({
      kind: "reject",
      reason: "excede_tope_por_transaccion",
    });
    expect(evaluatePolicy(policy({ dailyLimitUsdCents: 10 }), ctx({ ...skip, amountMinor: 11 }))).toEqual({
      kind: "reject",
      reason: "excede_limite_diario",
    });
    expect(evaluatePolicy(policy({ allowedCategories: ["a"] }), ctx({ ...skip, merchantCategory: "b" }))).toEqual({
      kind: "reject",
      reason: "categoria_no_permitida",
    });
    expect(evaluatePolicy(policy(), ctx({ ...skip, amountMinor: 11, balanceMinor: 10 }))).toEqual({
      kind: "reject",
      reason: "saldo_insuficiente",
    });
  });

  it("order: per-tx, category, daily, then approval, then balance", () => {
    const all = policy({
      maxPerTransactionUsdCents: 100,
      allowedCategories: ["a"],
      dailyLimitUsdCents: 100,
      approvalThresholdUsdCents: 10,
    });
    const broken = centsCtx({ amountMinor: 200, merchantCategory: "b", spentTodayMinor: 100, balanceMinor: 0 });
    expect(evaluatePolicy(all, exact(broken))).toEqual({ kind: "reject", reason: "excede_tope_por_transaccion" });
    expect(evaluatePolicy(all, exact({ ...broken, amountMinor: 50 }))).toEqual({
      kind: "reject",
      reason: "categoria_no_permitida",
    });
    expect(evaluatePolicy(all, exact({ ...broken, amountMinor: 50, merchantCategory: "a" }))).toEqual({
      kind: "reject",
      reason: "excede_limite_diario",
    });
    expect(
      evaluatePolicy(all, exact({ ...broken, amountMinor: 50, merchantCategory: "a", spentTodayMinor: 0 })),
    ).toEqual({
      kind: "approval",
      reason: "requiere_aprobacion_humana",
    });
    expect(
      evaluatePolicy(all, exact({ ...broken, amountMinor: 10, merchantCategory: "a", spentTodayMinor: 0 })),
    ).toEqual({
      kind: "reject",
      reason: "saldo_insuficiente",
    });
    expect(
      evaluatePolicy(
        all,
        exact({ ...broken, amountMinor: 10, merchantCategory: "a", spentTodayMinor: 0, balanceMinor: 10 }),
      ),
    ).toEqual({ kind: "pay" });
  });

  it("reasons are the documented strings", () => {
    expect(POLICY_REASONS).toEqual({
      perTransaction: "excede_tope_por_transaccion",
      category: "categoria_no_permitida",
      daily: "excede_limite_diario",
      balance: "saldo_insuficiente",
      approval: "requiere_aprobacion_humana",
    });
  });

  it("property: a decision to pay means every limit and the balance allow the amount", () => {
    const limit = fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: null });
    fc.assert(
      fc.property(
        limit,
        limit,
        fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: null }),
        fc.option(fc.array(fc.constantFrom<string>("a", "b", "c"), { maxLength: 3 }), { nil: null }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.option(fc.constantFrom<string>("a", "b", "c", "d"), { nil: null }),
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 10_000 }),
        fc.boolean(),
        (maxTx, daily, threshold, categories, amount, category, spent, balance, skip) => {
          const p: Policy = {
            maxPerTransactionUsdCents: maxTx,
            dailyLimitUsdCents: daily,
            allowedCategories: categories,
            approvalThresholdUsdCents: threshold,
            allowedX402Hosts: null,
          };
          const d = evaluatePolicy(
            p,
            exact({
              amountMinor: amount,
              merchantCategory: category,
              spentTodayMinor: spent,
              balanceMinor: balance,
              skipApprovalThreshold: skip,
            }),
          );
          const hardOk =
            (maxTx === null || amount <= maxTx) &&
            (!categories || categories.length === 0 || (category !== null && categories.includes(category))) &&
            (daily === null || spent + amount <= daily);
          const needsHuman = !skip && threshold !== null && amount > threshold;
          if (!hardOk) expect(d.kind).toBe("reject");
          else if (needsHuman) expect(d).toEqual({ kind: "approval", reason: "requiere_aprobacion_humana" });
          else if (amount > balance) expect(d).toEqual({ kind: "reject", reason: "saldo_insuficiente" });
          else expect(d).toEqual({ kind: "pay" });
        },
      ),
      { numRuns: 500, seed: SEED },
    );
  });
});

describe("PolicySchema and normalizePolicy (unit)", () => {
  it("normalizes absent fields to null", () => {
    expect(normalizePolicy(undefined)).toEqual({
      maxPerTransactionUsdCents: null,
      dailyLimitUsdCents: null,
      allowedCategories: null,
      approvalThresholdUsdCents: null,
      allowedX402Hosts: null,
    });
    expect(normalizePolicy({ dailyLimitUsdCents: 5 })).toEqual({
      maxPerTransactionUsdCents: null,
      dailyLimitUsdCents: 5,
      allowedCategories: null,
      approvalThresholdUsdCents: null,
      allowedX402Hosts: null,
    });
  });

  it("accepts valid policies and rejects invalid ones", () => {
    expect(PolicySchema.safeParse({}).success).toBe(true);
    expect(
      PolicySchema.safeParse({ maxPerTransactionUsdCents: null, approvalThresholdUsdCents: 0, allowedCategories: [] })
        .success,
    ).toBe(true);
    expect(PolicySchema.safeParse({ maxPerTransactionUsdCents: 0 }).success).toBe(false);
    expect(PolicySchema.safeParse({ dailyLimitUsdCents: 1.5 }).success).toBe(false);
    expect(PolicySchema.safeParse({ approvalThresholdUsdCents: -1 }).success).toBe(false);
    expect(PolicySchema.safeParse({ allowedCategories: "data" }).success).toBe(false);
    expect(PolicySchema.safeParse({ other: 1 }).success).toBe(false);
  });
});
