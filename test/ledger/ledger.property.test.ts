import { env } from "cloudflare:workers";
import fc from "fast-check";
import { keccak256, stringToHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { baseUnitsAfter } from "../../src/ledger/postings";
import { setFaultHook } from "../../src/lib/faults";
import { outboundOf } from "../../src/outbound/advance";
import { completePayout } from "../../src/payouts/service";
import { api, consoleToken } from "../helpers/api";
import { dispatchDirectly } from "../helpers/direct";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { SEED } from "../helpers/seed";
import { settledBelowACent } from "../helpers/sub-cent";

// Hundreds of requests: each goes straight into the fetch handler (test/helpers/direct.ts says why).
dispatchDirectly();

/**
 * Model-based property test of the wallet, charges, approvals, payouts and ledger.
 *
 * Each run builds a fresh world (2 merchants, 3 agents with random policies
 * and small balances) and drives a random sequence of operations through the
 * HTTP API while a small in-test model predicts every answer. Merchants also
 * earn settled x402 payments of any number of base units (below a cent or not),
 * so their balances are held, and checked, to the base unit (1 cent = 10,000). After the run
 * the database must agree with the model and with the ledger's invariants.
 * D1 persists across runs, so per-object checks are scoped to the run's world;
 * the global invariants (ledger sums to zero, chain verifies) cover everything.
 */

const CATEGORIES = ["data", "compute"] as const;

interface ModelPolicy {
  maxPerTransactionUsdCents: number | null;
  dailyLimitUsdCents: number | null;
  allowedCategories: string[] | null;
  approvalThresholdUsdCents: number | null;
}

interface MAgent {
  id: string;
  key: string;
  policy: ModelPolicy;
  balance: number;
  spentToday: number;
}
interface MMerchant {
  id: string;
  key: string;
  name: string;
  category: string | null;
  /** In base units: x402 payments credit amounts below a cent. */
  balance: bigint;
}
interface MCharge {
  id: string;
  merchant: number;
  /** In cents; an x402 charge's whole cents (its exact amount is `baseUnits`). */
  amount: number;
  baseUnits: bigint;
  method: "ledger" | "x402";
  status: "pending" | "paid";
  agent: number | null;
  reference: string | null;
}
interface MPayout {
  id: string;
  merchant: number;
  amount: number;
  status: "pending" | "paid" | "failed";
}
interface MApproval {
  id: string;
  charge: number;
  agent: number;
  status: "pending" | "granted" | "rejected" | "expired";
}

interface Model {
  agents: MAgent[];
  merchants: MMerchant[];
  charges: MCharge[];
  approvals: MApproval[];
  payouts: MPayout[];
}

interface Real {
  token: string;
}

type Decision = { kind: "pay" } | { kind: "reject"; reason: string } | { kind: "approval" };

/** The policy in the order docs/api.md (Agents and policies) gives: per-tx cap, category, daily limit, approval threshold, balance. */
function modelDecide(agent: MAgent, merchant: MMerchant, amount: number, skipThreshold: boolean): Decision {
  const p = agent.policy;
  if (p.maxPerTransactionUsdCents !== null && amount > p.maxPerTransactionUsdCents)
    return { kind: "reject", reason: "excede_tope_por_transaccion" };
  if (
    p.allowedCategories &&
    p.allowedCategories.length > 0 &&
    (merchant.category === null || !p.allowedCategories.includes(merchant.category))
  ) {
    return { kind: "reject", reason: "categoria_no_permitida" };
  }
  if (p.dailyLimitUsdCents !== null && agent.spentToday + amount > p.dailyLimitUsdCents)
    return { kind: "reject", reason: "excede_limite_diario" };
  if (!skipThreshold && p.approvalThresholdUsdCents !== null && amount > p.approvalThresholdUsdCents)
    return { kind: "approval" };
  if (amount > agent.balance) return { kind: "reject", reason: "saldo_insuficiente" };
  return { kind: "pay" };
}

/** Applies a payment the service just confirmed to the model. */
function applyPaid(m: Model, chargeIndex: number, agentIndex: number, reference: string) {
  const charge = m.charges[chargeIndex]!;
  const agent = m.agents[agentIndex]!;
  charge.status = "paid";
  charge.agent = agentIndex;
  charge.reference = reference;
  agent.balance -= charge.amount;
  agent.spentToday += charge.amount;
  m.merchants[charge.merchant]!.balance += charge.baseUnits;
  // Paying a charge by any path expires its other pending approvals.
  for (const a of m.approvals) if (a.charge === chargeIndex && a.status === "pending") a.status = "expired";
}

/** How often each answer was seen across all runs, to show what the generators exercised. */
const seen: Record<string, number> = {};
const see = (what: string) => {
  seen[what] = (seen[what] ?? 0) + 1;
};

const pick = <T>(xs: T[], n: number) => xs[n % xs.length]!;

const UNITS_PER_CENT = 10_000n;
/** Whole cents of a base-unit balance, rounded down, as the cents columns and fields state it. */
const centsOf = (baseUnits: bigint) => Number(baseUnits / UNITS_PER_CENT);
const unitsOf = (cents: number) => BigInt(cents) * UNITS_PER_CENT;

class CreditCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly agent: number,
    readonly amount: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const agent = m.agents[this.agent]!;
    const res = await api("POST", `/console/agents/${agent.id}/credits`, {
      token: r.token,
      body: { amountUsdCents: this.amount },
    });
    agent.balance += this.amount;
    expect(res.status, this.toString()).toBe(200);
    expect(res.body.balanceMinor).toBe(agent.balance);
  }
  toString = () => `credit(agent${this.agent}, ${this.amount})`;
}

class CreateChargeCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly merchant: number,
    readonly amount: number,
  ) {}
  check = () => true;
  async run(m: Model) {
    const merchant = m.merchants[this.merchant]!;
    const res = await api("POST", "/merchant/charges", { token: merchant.key, body: { amountUsdCents: this.amount } });
    expect(res.status, this.toString()).toBe(201);
    expect(res.body).toMatchObject({
      merchantId: merchant.id,
      amountMinor: this.amount,
      status: "pending",
      agentId: null,
      reference: null,
    });
    m.charges.push({
      id: res.body.chargeId,
      merchant: this.merchant,
      amount: this.amount,
      baseUnits: unitsOf(this.amount),
      method: "ledger",
      status: "pending",
      agent: null,
      reference: null,
    });
  }
  toString = () => `charge(merchant${this.merchant}, ${this.amount})`;
}

/**
 * A settled x402 payment of `baseUnits` to a merchant, below a cent or not: a charge of that exact
 * amount claimed by a settling payment, credited by the ledger's own x402 plan as a settlement is
 * (the run has no chain to settle on, and what is tested here is what the credit leaves).
 */
class X402PaymentCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly merchant: number,
    readonly baseUnits: bigint,
  ) {}
  check = () => true;
  async run(m: Model) {
    const merchant = m.merchants[this.merchant]!;
    const { chargeId, transaction, results } = await settledBelowACent(merchant.id, this.baseUnits);
    see(`x402 ${this.baseUnits % UNITS_PER_CENT === 0n ? "whole cents" : "below a cent"}`);
    m.charges.push({
      id: chargeId,
      merchant: this.merchant,
      amount: centsOf(this.baseUnits),
      baseUnits: this.baseUnits,
      method: "x402",
      status: "paid",
      agent: null,
      reference: transaction,
    });
    merchant.balance += this.baseUnits;
    expect(baseUnitsAfter(results, `merchant:${merchant.id}`), this.toString()).toBe(merchant.balance);
  }
  toString = () => `x402(merchant${this.merchant}, ${this.baseUnits} units)`;
}

class PayCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly agent: number,
    readonly chargePick: number,
    readonly anyStatus: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.charges.length > 0;
  async run(m: Model) {
    // Usually a pending charge; sometimes any charge, so paid ones are retried too.
    const pending = m.charges.flatMap((c, i) => (c.status === "pending" ? [i] : []));
    const chargeIndex =
      this.anyStatus || pending.length === 0 ? this.chargePick % m.charges.length : pick(pending, this.chargePick);
    const charge = m.charges[chargeIndex]!;
    const agent = m.agents[this.agent]!;
    const merchant = m.merchants[charge.merchant]!;
    const res = await api("POST", `/charges/${charge.id}/pay`, { token: agent.key });
    const label = `${this.toString()} -> ${res.status} ${res.text}`;
    see(`pay ${res.status} ${res.body.pendingApproval ? "pendingApproval" : (res.body.error ?? "paid")}`);

    if (charge.status !== "pending") {
      expect([res.status, res.body.error], label).toEqual([409, "charge_not_pending"]);
      return;
    }
    const decision = modelDecide(agent, merchant, charge.amount, false);
    if (decision.kind === "reject") {
      expect([res.status, res.body.error], label).toEqual([402, decision.reason]);
      return;
    }
    if (decision.kind === "approval") {
      // One pending approval per charge and agent: another agent's is its own (docs/decisions.md).
      const existing = m.approvals.find(
        (a) => a.charge === chargeIndex && a.agent === this.agent && a.status === "pending",
      );
      expect(res.status, label).toBe(402);
      expect(res.body.pendingApproval, label).toBe(true);
      expect(res.body.reason, label).toBe("requiere_aprobacion_humana");
      expect(res.body.charge.status, label).toBe("pending");
      if (existing) {
        expect(res.body.approvalId, label).toBe(existing.id);
      } else {
        expect(res.body.approvalId, label).toMatch(/^apr_/);
        expect(
          m.approvals.some((a) => a.id === res.body.approvalId),
          label,
        ).toBe(false);
        m.approvals.push({ id: res.body.approvalId, charge: chargeIndex, agent: this.agent, status: "pending" });
      }
      return;
    }
    expect(res.status, label).toBe(200);
    expect(res.body.paid, label).toBe(true);
    expect(res.body.charge, label).toMatchObject({
      chargeId: charge.id,
      status: "paid",
      method: "ledger",
      agentId: agent.id,
    });
    applyPaid(m, chargeIndex, this.agent, res.body.charge.reference);
    expect(res.body.merchantBalanceMinor, label).toBe(centsOf(merchant.balance));
  }
  toString = () => `pay(agent${this.agent}, charge#${this.chargePick}${this.anyStatus ? ", any" : ""})`;
}

/** Picks an approval: a pending one usually, any one (likely decided) sometimes. */
function pickApproval(m: Readonly<Model>, n: number, anyStatus: boolean): MApproval {
  const pending = m.approvals.filter((a) => a.status === "pending");
  return anyStatus || pending.length === 0 ? pick(m.approvals, n) : pick(pending, n);
}

class GrantCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly approvalPick: number,
    readonly anyStatus: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.approvals.length > 0;
  async run(m: Model, r: Real) {
    const approval = pickApproval(m, this.approvalPick, this.anyStatus);
    const res = await api("POST", `/approvals/${approval.id}/grant`, { token: r.token });
    const label = `${this.toString()} [${approval.id} ${approval.status}] -> ${res.status} ${res.text}`;
    see(`grant ${res.status} ${res.body.error ?? "granted"}`);
    if (approval.status !== "pending") {
      expect([res.status, res.body.error], label).toEqual([409, "approval_not_pending"]);
      return;
    }
    const charge = m.charges[approval.charge]!;
    expect(charge.status, "model: a pending approval's charge is pending").toBe("pending");
    const agent = m.agents[approval.agent]!;
    const decision = modelDecide(agent, m.merchants[charge.merchant]!, charge.amount, true);
    if (decision.kind === "reject") {
      // Hard limits and the balance still apply; the approval stays pending.
      expect([res.status, res.body.error], label).toEqual([402, decision.reason]);
      return;
    }
    expect(res.status, label).toBe(200);
    expect(res.body.approval, label).toEqual({ approvalId: approval.id, status: "granted" });
    expect(res.body.charge, label).toMatchObject({
      chargeId: charge.id,
      status: "paid",
      method: "ledger",
      agentId: agent.id,
    });
    applyPaid(m, approval.charge, approval.agent, res.body.charge.reference);
    approval.status = "granted";
  }
  toString = () => `grant(approval#${this.approvalPick}${this.anyStatus ? ", any" : ""})`;
}

class RejectCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly approvalPick: number,
    readonly anyStatus: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.approvals.length > 0;
  async run(m: Model, r: Real) {
    const approval = pickApproval(m, this.approvalPick, this.anyStatus);
    const res = await api("POST", `/approvals/${approval.id}/reject`, { token: r.token });
    const label = `${this.toString()} [${approval.id} ${approval.status}] -> ${res.status} ${res.text}`;
    see(`reject ${res.status} ${res.body.error ?? "rejected"}`);
    if (approval.status !== "pending") {
      expect([res.status, res.body.error], label).toEqual([409, "approval_not_pending"]);
      return;
    }
    expect(res.status, label).toBe(200);
    expect(res.body.approval, label).toEqual({ approvalId: approval.id, status: "rejected" });
    approval.status = "rejected";
  }
  toString = () => `reject(approval#${this.approvalPick}${this.anyStatus ? ", any" : ""})`;
}

/**
 * A payout of a merchant that has a cent or more (or, sometimes, of any merchant): the whole balance,
 * a share of it in percent, or more than it holds. Payouts move whole cents: the whole balance is its
 * whole cents, what is below a cent stays, and a cent more than the whole cents is more than it holds.
 */
class PayoutCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly merchantPick: number,
    readonly share: number | "all" | "over",
    readonly anyMerchant: boolean,
  ) {}
  check = () => true;
  async run(m: Model) {
    const funded = m.merchants.flatMap((x, i) => (x.balance >= UNITS_PER_CENT ? [i] : []));
    const index =
      this.anyMerchant || funded.length === 0
        ? this.merchantPick % m.merchants.length
        : pick(funded, this.merchantPick);
    const merchant = m.merchants[index]!;
    const cents = centsOf(merchant.balance);
    const amount =
      this.share === "all"
        ? cents
        : this.share === "over"
          ? cents + 1
          : Math.max(1, Math.ceil((cents * this.share) / 100));
    const body = this.share === "all" ? undefined : { amountUsdCents: amount };
    const res = await api("POST", "/merchant/payouts", { token: merchant.key, body });
    const label = `${this.toString()} [merchant${index} ${merchant.balance}] -> ${res.status} ${res.text}`;
    const remainder = merchant.balance % UNITS_PER_CENT !== 0n ? ", a remainder below a cent" : "";
    see(`payout ${this.share === "all" ? "all" : "amount"} ${res.status} ${res.body.error ?? "pending"}${remainder}`);
    if (amount <= 0 || amount > cents) {
      expect([res.status, res.body], label).toEqual([409, { error: "saldo_insuficiente" }]);
      return;
    }
    expect(res.status, label).toBe(201);
    expect(res.body.payout, label).toMatchObject({ merchantId: merchant.id, amountMinor: amount, status: "pending" });
    merchant.balance -= unitsOf(amount);
    expect(res.body.balanceMinor, label).toBe(centsOf(merchant.balance));
    m.payouts.push({ id: res.body.payout.payoutId, merchant: index, amount, status: "pending" });
  }
  toString = () => `payout(merchant#${this.merchantPick}, ${this.share}${this.anyMerchant ? ", any" : ""})`;
}

/**
 * Records a payout's transfer as decided, through the completion the engine itself uses: paid, or
 * failed with the amount given back. A decided payout stays as it is (the completion is idempotent).
 */
class CompletePayoutCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly payoutPick: number,
    readonly paid: boolean,
    readonly anyStatus: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.payouts.length > 0;
  async run(m: Model) {
    const pending = m.payouts.filter((p) => p.status === "pending");
    const payout =
      this.anyStatus || pending.length === 0 ? pick(m.payouts, this.payoutPick) : pick(pending, this.payoutPick);
    const transfer = await outboundOf(env, "payout", payout.id);
    expect(transfer, payout.id).not.toBeNull();
    await completePayout(
      env,
      settingsOf(env).x402!,
      transfer!,
      this.paid
        ? { kind: "confirmed", transaction: keccak256(stringToHex(payout.id)) }
        : { kind: "failed", reason: "authorization_expired", unsent: false },
    );
    see(`complete ${payout.status} -> ${this.paid ? "paid" : "failed"}`);
    if (payout.status === "pending") {
      payout.status = this.paid ? "paid" : "failed";
      if (!this.paid) m.merchants[payout.merchant]!.balance += unitsOf(payout.amount);
    }
    const merchant = m.merchants[payout.merchant]!;
    const res = await api("GET", `/merchant/payouts/${payout.id}`, { token: merchant.key });
    expect(res.body.payout.status, this.toString()).toBe(payout.status);
    expect(await scalar("SELECT balance_minor AS v FROM merchants WHERE id = ?", merchant.id)).toBe(
      centsOf(merchant.balance),
    );
    expect(await units("SELECT balance_base_units AS v FROM merchants WHERE id = ?", merchant.id)).toBe(
      merchant.balance,
    );
  }
  toString = () =>
    `complete(payout#${this.payoutPick}, ${this.paid ? "paid" : "failed"}${this.anyStatus ? ", any" : ""})`;
}

const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: null, freq: 2 });

const policyArb: fc.Arbitrary<ModelPolicy> = fc.record({
  maxPerTransactionUsdCents: optional(fc.integer({ min: 150, max: 800 })),
  dailyLimitUsdCents: optional(fc.integer({ min: 300, max: 3_000 })),
  allowedCategories: fc.constantFrom<string[] | null>(
    null,
    null,
    null,
    null,
    [],
    ["data"],
    ["compute"],
    ["data", "compute"],
    ["other"],
  ),
  approvalThresholdUsdCents: optional(fc.integer({ min: 0, max: 500 })),
});

const agentSpec = fc.record({ policy: policyArb, balance: fc.integer({ min: 0, max: 2_000 }) });

const worldArb = fc.record({
  merchantCategories: fc.tuple(
    fc.constantFrom<string | null>(...CATEGORIES, ...CATEGORIES, null),
    fc.constantFrom<string | null>(...CATEGORIES, ...CATEGORIES, null),
  ),
  agents: fc.tuple(agentSpec, agentSpec, agentSpec),
  /** What each merchant has earned before the run, so its payouts have something to take. */
  merchantFunds: fc.tuple(fc.integer({ min: 0, max: 1_500 }), fc.integer({ min: 0, max: 1_500 })),
});

const agentIndex = fc.integer({ min: 0, max: 2 });
const merchantIndex = fc.integer({ min: 0, max: 1 });
const anyStatus = fc.boolean().chain((b) => (b ? fc.boolean() : fc.constant(false))); // true about a quarter of the time

const commandArb: fc.Arbitrary<fc.AsyncCommand<Model, Real>> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.tuple(agentIndex, fc.integer({ min: 1, max: 1_000 })).map(([a, n]) => new CreditCommand(a, n)),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(merchantIndex, fc.integer({ min: 1, max: 500 }))
      .map(([mi, n]) => new CreateChargeCommand(mi, n)),
  },
  { weight: 6, arbitrary: fc.tuple(agentIndex, fc.nat(), anyStatus).map(([a, c, s]) => new PayCommand(a, c, s)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), anyStatus).map(([p, s]) => new GrantCommand(p, s)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), anyStatus).map(([p, s]) => new RejectCommand(p, s)) },
  {
    // Mostly below a cent or a few cents and a fraction; sometimes whole cents.
    weight: 2,
    arbitrary: fc
      .tuple(
        merchantIndex,
        fc.oneof(
          { weight: 3, arbitrary: fc.integer({ min: 1, max: 50_000 }) },
          { weight: 1, arbitrary: fc.integer({ min: 1, max: 5 }).map((c) => c * 10_000) },
        ),
      )
      .map(([mi, n]) => new X402PaymentCommand(mi, BigInt(n))),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.nat(),
        fc.oneof(fc.integer({ min: 1, max: 100 }), fc.constant("all" as const), fc.constant("over" as const)),
        anyStatus,
      )
      .map(([mi, share, any]) => new PayoutCommand(mi, share, any)),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.nat(), fc.boolean(), anyStatus).map(([p, paid, s]) => new CompletePayoutCommand(p, paid, s)),
  },
);

type World = typeof worldArb extends fc.Arbitrary<infer W> ? W : never;

async function buildWorld(world: World, run: number): Promise<Model> {
  const merchants = await Promise.all(
    world.merchantCategories.map(async (category, i) => {
      const created = await createMerchant({ name: `prop-r${run}-m${i}`, ...(category ? { category } : {}) });
      const address = privateKeyToAccount(generatePrivateKey()).address;
      const set = await api("PUT", "/merchant/payout-address", { token: created.apiKey, body: { address } });
      expect(set.status).toBe(200);
      return { id: created.merchantId, key: created.apiKey, name: `prop-r${run}-m${i}`, category, balance: 0n };
    }),
  );
  const agents: MAgent[] = [];
  for (const [i, spec] of world.agents.entries()) {
    const created = await createAgent({
      name: `prop-r${run}-a${i}`,
      policy: spec.policy,
      ...(spec.balance > 0 ? { credit: spec.balance } : {}),
    });
    agents.push({
      id: created.agentId,
      key: created.apiKey,
      policy: spec.policy,
      balance: spec.balance,
      spentToday: 0,
    });
  }
  const model: Model = { merchants, agents, charges: [], approvals: [], payouts: [] };
  await fundMerchants(model, world.merchantFunds, run);
  return model;
}

/**
 * Gives merchants their starting balance: a fourth agent, with no limits and outside the
 * commands' reach, pays a charge of each; the model holds it like any other agent and charge.
 */
async function fundMerchants(m: Model, funds: readonly number[], run: number) {
  const total = funds.reduce((a, b) => a + b, 0);
  if (total === 0) return;
  const payer = await createAgent({ name: `prop-r${run}-funder`, credit: total });
  const index = m.agents.length;
  m.agents.push({
    id: payer.agentId,
    key: payer.apiKey,
    policy: {
      maxPerTransactionUsdCents: null,
      dailyLimitUsdCents: null,
      allowedCategories: null,
      approvalThresholdUsdCents: null,
    },
    balance: total,
    spentToday: 0,
  });
  for (const [i, amount] of funds.entries()) {
    if (amount === 0) continue;
    const created = await createCharge(m.merchants[i]!.key, amount);
    m.charges.push({
      id: created.chargeId,
      merchant: i,
      amount,
      baseUnits: unitsOf(amount),
      method: "ledger",
      status: "pending",
      agent: null,
      reference: null,
    });
    const res = await payCharge(payer.apiKey, created.chargeId);
    expect(res.status, res.text).toBe(200);
    applyPaid(m, m.charges.length - 1, index, res.body.charge.reference);
  }
}

const db = () => env.DB;

async function scalar(sql: string, ...params: (string | number)[]): Promise<number> {
  return (await db()
    .prepare(sql)
    .bind(...params)
    .first<{ v: number }>())!.v;
}

/** A base-unit figure, read as text so a sum past 2^53 stays exact. */
async function units(sql: string, ...params: (string | number)[]): Promise<bigint> {
  const row = await db()
    .prepare(`SELECT CAST(v AS TEXT) AS v FROM (${sql})`)
    .bind(...params)
    .first<{ v: string }>();
  return BigInt(row!.v);
}

/**
 * A settled x402 charge: one charge.paid audit row with no agent, and one transfer of its exact amount
 * from the network's external account to the merchant.
 */
async function checkX402Charge(
  m: Model,
  charge: MCharge,
  audits: { agentId: string | null; amountMinor: number | null; baseUnits: string | null; reference: string }[],
) {
  expect(
    audits.map((a) => ({ agentId: a.agentId, reference: a.reference })),
    `${charge.id} charge.paid audit`,
  ).toEqual([{ agentId: null, reference: charge.reference }]);
  // The row states the exact amount; its cents column keeps the whole cents (a row states null for them).
  expect(audits[0]!.baseUnits, `${charge.id} audit amount`).toBe(charge.baseUnits.toString());
  expect(audits[0]!.amountMinor).toBe(Number(charge.baseUnits / UNITS_PER_CENT));
  const entries = await db()
    .prepare(
      "SELECT account, CAST(amount_base_units AS TEXT) AS baseUnits FROM ledger_entries WHERE transfer_id = ? ORDER BY amount_base_units",
    )
    .bind(charge.reference!)
    .all<{ account: string; baseUnits: string }>();
  expect(entries.results, `${charge.id} transfer`).toEqual([
    { account: `external:x402:${settingsOf(env).x402!.network}`, baseUnits: (-charge.baseUnits).toString() },
    { account: `merchant:${m.merchants[charge.merchant]!.id}`, baseUnits: charge.baseUnits.toString() },
  ]);
}

/** Everything the run must leave true: global ledger invariants, and the world agreeing with the model. */
async function checkInvariants(m: Model, token: string) {
  // Global: the double-entry ledger sums to zero and the audit chain verifies.
  expect(await scalar("SELECT COALESCE(SUM(amount_minor), 0) AS v FROM ledger_entries")).toBe(0);
  expect(
    await scalar(
      "SELECT COUNT(*) AS v FROM (SELECT transfer_id FROM ledger_entries GROUP BY transfer_id HAVING SUM(amount_minor) != 0)",
    ),
  ).toBe(0);
  // And so it does to the base unit, in total and per transfer.
  expect(await units("SELECT COALESCE(SUM(amount_base_units), 0) AS v FROM ledger_entries")).toBe(0n);
  expect(
    await scalar(
      "SELECT COUNT(*) AS v FROM (SELECT transfer_id FROM ledger_entries GROUP BY transfer_id HAVING SUM(amount_base_units) != 0)",
    ),
  ).toBe(0);
  expect(await scalar("SELECT COUNT(*) AS v FROM agents WHERE balance_minor < 0")).toBe(0);
  expect(await scalar("SELECT COUNT(*) AS v FROM merchants WHERE balance_minor < 0")).toBe(0);
  // Money on its way out (or gone) is exactly the payouts that did not fail.
  expect(
    await scalar(
      "SELECT COALESCE(SUM(amount_minor), 0) AS v FROM ledger_entries WHERE account LIKE 'external:payouts:%'",
    ),
  ).toBe(await scalar("SELECT COALESCE(SUM(amount_minor), 0) AS v FROM payouts WHERE status != 'failed'"));
  const verify = await api("GET", "/console/audit/verify", { token });
  expect(verify.status).toBe(200);
  expect(verify.body.ok, JSON.stringify(verify.body)).toBe(true);

  // World: balances agree with the model and with the ledger, to the base unit.
  for (const [i, agent] of m.agents.entries()) {
    const column = await scalar("SELECT balance_minor AS v FROM agents WHERE id = ?", agent.id);
    expect(column, `agent${i} balance`).toBe(agent.balance);
    expect(await units("SELECT balance_base_units AS v FROM agents WHERE id = ?", agent.id), `agent${i} exact`).toBe(
      unitsOf(agent.balance),
    );
    expect(
      await units(
        "SELECT COALESCE(SUM(amount_base_units), 0) AS v FROM ledger_entries WHERE account = ?",
        `agent:${agent.id}`,
      ),
      `agent${i} ledger in base units`,
    ).toBe(unitsOf(agent.balance));
    expect(column, `agent${i} balance is non-negative`).toBeGreaterThanOrEqual(0);
    expect(
      await scalar(
        "SELECT COALESCE(SUM(amount_minor), 0) AS v FROM ledger_entries WHERE account = ?",
        `agent:${agent.id}`,
      ),
      `agent${i} ledger`,
    ).toBe(column);
    const paidByAgent = m.charges.filter((c) => c.agent === i).reduce((s, c) => s + c.amount, 0);
    expect(
      await scalar(
        "SELECT COALESCE(SUM(amount_minor), 0) AS v FROM charges WHERE agent_id = ? AND status = 'paid'",
        agent.id,
      ),
      `agent${i} paid`,
    ).toBe(paidByAgent);
  }
  for (const [i, merchant] of m.merchants.entries()) {
    // A merchant's entries may be below a cent, so its ledger is summed in base units; its cents
    // column is the whole cents of that, rounded down.
    const exact = await units("SELECT balance_base_units AS v FROM merchants WHERE id = ?", merchant.id);
    expect(exact, `merchant${i} balance`).toBe(merchant.balance);
    expect(exact).toBeGreaterThanOrEqual(0n);
    const column = await scalar("SELECT balance_minor AS v FROM merchants WHERE id = ?", merchant.id);
    expect(column, `merchant${i} whole cents`).toBe(centsOf(exact));
    expect(
      await units(
        "SELECT COALESCE(SUM(amount_base_units), 0) AS v FROM ledger_entries WHERE account = ?",
        `merchant:${merchant.id}`,
      ),
      `merchant${i} ledger`,
    ).toBe(exact);
    const me = await api("GET", "/merchant/me", { token: merchant.key });
    expect(me.status, me.text).toBe(200);
    expect(me.body.merchant, `merchant${i} /merchant/me`).toMatchObject({
      balanceBaseUnits: exact.toString(),
      balanceMinor: column,
    });
    // What the merchant earned, exactly, less what left it in payouts not failed (whole cents).
    expect(
      await units(
        `SELECT COALESCE((SELECT SUM(amount_base_units) FROM charges WHERE merchant_id = ?1 AND status = 'paid'), 0)
           - COALESCE((SELECT SUM(amount_minor) FROM payouts WHERE merchant_id = ?1 AND status != 'failed'), 0) * 10000 AS v`,
        merchant.id,
      ),
      `merchant${i} paid charges less payouts`,
    ).toBe(exact);
    const payouts = await db()
      .prepare("SELECT id, amount_minor AS amount, status FROM payouts WHERE merchant_id = ? ORDER BY id")
      .bind(merchant.id)
      .all<{ id: string; amount: number; status: string }>();
    expect(payouts.results, `merchant${i} payouts`).toEqual(
      m.payouts
        .filter((p) => p.merchant === i)
        .map((p) => ({ id: p.id, amount: p.amount, status: p.status }))
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    );
    expect(await scalar("SELECT COUNT(*) AS v FROM charges WHERE merchant_id = ?", merchant.id)).toBe(
      m.charges.filter((c) => c.merchant === i).length,
    );
  }

  // World: each charge is where the model says; a paid one has exactly one charge.paid audit row and one balanced transfer.
  for (const charge of m.charges) {
    const row = await db()
      .prepare(
        "SELECT status, agent_id AS agentId, reference, amount_minor AS amountMinor, CAST(amount_base_units AS TEXT) AS baseUnits FROM charges WHERE id = ?",
      )
      .bind(charge.id)
      .first<{ status: string; agentId: string | null; reference: string | null }>();
    expect(row, charge.id).toEqual({
      status: charge.status,
      agentId: charge.agent === null ? null : m.agents[charge.agent]!.id,
      reference: charge.reference,
      amountMinor: charge.amount,
      baseUnits: charge.baseUnits.toString(),
    });
    const audits = await db()
      .prepare(
        "SELECT agent_id AS agentId, amount_minor AS amountMinor, amount_base_units AS baseUnits, reference FROM audit_events WHERE charge_id = ? AND type = 'charge.paid'",
      )
      .bind(charge.id)
      .all<{ agentId: string; amountMinor: number; baseUnits: string | null; reference: string }>();
    if (charge.method === "x402") {
      await checkX402Charge(m, charge, audits.results);
      continue;
    }
    if (charge.status === "paid") {
      expect(audits.results, `${charge.id} charge.paid audit`).toEqual([
        {
          agentId: m.agents[charge.agent!]!.id,
          amountMinor: charge.amount,
          baseUnits: charge.baseUnits.toString(),
          reference: charge.reference,
        },
      ]);
      const entries = await db()
        .prepare(
          "SELECT account, amount_minor AS amountMinor FROM ledger_entries WHERE transfer_id = ? ORDER BY amount_minor",
        )
        .bind(charge.reference!)
        .all<{ account: string; amountMinor: number }>();
      expect(entries.results).toEqual([
        { account: `agent:${m.agents[charge.agent!]!.id}`, amountMinor: -charge.amount },
        { account: `merchant:${m.merchants[charge.merchant]!.id}`, amountMinor: charge.amount },
      ]);
    } else {
      expect(audits.results, `${charge.id} has no charge.paid audit`).toEqual([]);
    }
  }

  // World: each payout debited once, reversed once if it failed, with one event of its outcome.
  for (const payout of m.payouts) {
    const merchantAccount = `merchant:${m.merchants[payout.merchant]!.id}`;
    expect(
      await scalar(
        "SELECT COALESCE(SUM(amount_minor), 0) AS v FROM ledger_entries WHERE transfer_id = ? AND account = ?",
        payout.id,
        merchantAccount,
      ),
      `${payout.id} debit`,
    ).toBe(-payout.amount);
    expect(
      await scalar(
        "SELECT COALESCE(SUM(amount_minor), 0) AS v FROM ledger_entries WHERE transfer_id = ? AND account = ?",
        `${payout.id}:reversal`,
        merchantAccount,
      ),
      `${payout.id} reversal`,
    ).toBe(payout.status === "failed" ? payout.amount : 0);
    for (const type of ["payout.paid", "payout.failed"])
      expect(
        await scalar(
          "SELECT COUNT(*) AS v FROM outbox_events WHERE type = ? AND json_extract(data, '$.payoutId') = ?",
          type,
          payout.id,
        ),
        `${payout.id} ${type} events`,
      ).toBe(type === `payout.${payout.status}` ? 1 : 0);
  }

  // World: approvals are exactly the model's, in the model's states (at most one pending per charge and agent).
  const agentIds = m.agents.map((a) => a.id);
  const approvals = await db()
    .prepare(`SELECT id, status FROM approvals WHERE agent_id IN (${agentIds.map(() => "?").join(", ")}) ORDER BY id`)
    .bind(...agentIds)
    .all<{ id: string; status: string }>();
  expect(approvals.results).toEqual(
    m.approvals.map((a) => ({ id: a.id, status: a.status })).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
  );
}

describe("ledger properties", () => {
  it("random sequences of credits, charges, payments, x402 payments below a cent, approval decisions and payouts keep the ledger, balances, audit chain and model in agreement, to the base unit", async () => {
    const token = await consoleToken();
    let run = 0;
    const stats = {
      runs: 0,
      steps: 0,
      paid: 0,
      approvals: 0,
      payoutsPaid: 0,
      payoutsFailed: 0,
      x402BelowCent: 0,
      subCentRemainders: 0,
    };
    // A payout's own send (after its answer) stops before the chain: the commands decide each outcome,
    // and the settlement address that other test files share is never drawn on.
    setFaultHook((point) => {
      if (point === "outbound.before_send") throw new Error("ledger property: payouts are completed by the model");
    });
    try {
      await runProperty();
    } finally {
      setFaultHook(null);
    }
    async function runProperty() {
      await fc.assert(
        fc.asyncProperty(worldArb, fc.array(commandArb, { minLength: 25, maxLength: 35 }), async (world, commands) => {
          run++;
          let model: Model | undefined;
          await fc.asyncModelRun(async () => {
            model = await buildWorld(world, run);
            return { model, real: { token } };
          }, commands);
          await checkInvariants(model!, token);
          stats.runs++;
          stats.steps += commands.length;
          stats.paid += model!.charges.filter((c) => c.status === "paid" && c.method === "ledger").length;
          stats.x402BelowCent += model!.charges.filter(
            (c) => c.method === "x402" && c.baseUnits % UNITS_PER_CENT !== 0n,
          ).length;
          stats.subCentRemainders += model!.merchants.filter((x) => x.balance % UNITS_PER_CENT !== 0n).length;
          stats.approvals += model!.approvals.length;
          stats.payoutsPaid += model!.payouts.filter((p) => p.status === "paid").length;
          stats.payoutsFailed += model!.payouts.filter((p) => p.status === "failed").length;
        }),
        // Every request goes through the harness's self-fetch, which slows as a file's request count grows
        // (cloudflare/workers-sdk#15446), so a failure's shrinking is cut short rather than left to time out.
        { numRuns: 16, seed: SEED, plugins: [fc.interruptAfterTimeLimit(120_000)] },
      );
    }
    // The generators must actually exercise payments, approvals and both payout outcomes, or the property says little.
    expect(stats.runs).toBeGreaterThanOrEqual(8);
    expect(stats.paid).toBeGreaterThan(0);
    expect(stats.approvals).toBeGreaterThan(0);
    expect(stats.payoutsPaid).toBeGreaterThan(0);
    expect(stats.payoutsFailed).toBeGreaterThan(0);
    // ...and amounts below a cent, credited and left behind in balances.
    expect(stats.x402BelowCent).toBeGreaterThan(0);
    expect(stats.subCentRemainders).toBeGreaterThan(0);
    console.log(`ledger property: ${JSON.stringify(stats)}\n${JSON.stringify(seen, Object.keys(seen).sort(), 1)}`);
  }, 200_000);
});
