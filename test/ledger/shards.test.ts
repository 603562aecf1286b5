import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { auditRowOf } from "../../src/audit/service";
import { settingsOf } from "../../src/config/settings";
import { dbOf } from "../../src/db/client";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { GENESIS_HASH, genesisHashOf, verifyChain } from "../../src/ledger/chain";
import { homeShard } from "../../src/ledger/directory";
import { ensureHomeRow } from "../../src/ledger/home-rows";
import { type LedgerDurableObject, ledgerName, ledgerOf } from "../../src/ledger/ledger.do";
import { agentCreditPlan } from "../../src/ledger/movements";
import { CONTROL_IDS, ID_PREFIXES, type IdKind, newId } from "../../src/lib/ids";
import { createAgent, createMerchant } from "../helpers/factories";

/*
 * The seam for more than one ledger database (issue 27): ids carry their shard, the directory
 * assigns each owner once and refuses to move it, each shard has its own sequencer and audit chain
 * from a genesis of its own, and a plan can only be committed by its shard's sequencer.
 */
const credit = (agentId: string, amountMinor: number) =>
  agentCreditPlan({
    agentId,
    amountMinor,
    transferId: `shard_${crypto.randomUUID()}`,
    reference: `shard-test-${crypto.randomUUID()}`,
    by: "test",
    createdAt: new Date().toISOString(),
  });

describe("ids carry their shard", () => {
  it("shard 0's ids are untagged and every other shard's round-trip through shardOfId", () => {
    for (const kind of Object.keys(ID_PREFIXES) as IdKind[]) {
      if (kind === "merchantKey" || kind === "agentKey" || kind === "webhookSecret") continue;
      const plain = newId(kind, CONTROL_IDS);
      expect(plain.startsWith(ID_PREFIXES[kind])).toBe(true);
      expect(shardOfId(plain)).toBe(0);
      for (const shard of [1, 7, 63]) {
        const tagged = newId(kind, { shard });
        expect(tagged.startsWith(ID_PREFIXES[kind])).toBe(true);
        expect(shardOfId(tagged)).toBe(shard);
      }
    }
    // Upper-case references keep their style; the tag follows it.
    expect(newId("payment", { shard: 1 })).toMatch(/^PAY_S1_[0-9A-Z]{24}$/);
    expect(newId("charge", { shard: 1 })).toMatch(/^chg_s1_[0-9a-z]{24}$/);
    // Something that only looks like a tag is not one unless the random part follows it whole.
    expect(shardOfId("chg_s1_short")).toBe(0);
  });
});

describe("the shard directory", () => {
  it("records every new merchant and agent once, with a shard this deployment runs", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent();
    expect(await homeShard(env, "merchant", merchant.merchantId)).toBe(0);
    expect(await homeShard(env, "agent", agent.agentId)).toBe(0);
    const rows = await env.DB.prepare(
      "SELECT owner_kind, owner_id, shard FROM shard_directory WHERE owner_id IN (?, ?) ORDER BY owner_kind",
    )
      .bind(merchant.merchantId, agent.agentId)
      .all();
    expect(rows.results).toEqual([
      { owner_kind: "agent", owner_id: agent.agentId, shard: 0 },
      { owner_kind: "merchant", owner_id: merchant.merchantId, shard: 0 },
    ]);
  });

  it("refuses to move or forget an owner", async () => {
    const merchant = await createMerchant();
    const move = env.DB.prepare("UPDATE shard_directory SET shard = 1 WHERE owner_id = ?").bind(merchant.merchantId);
    await expect(move.run()).rejects.toThrow(/shard_assignment_immutable/);
    const forget = env.DB.prepare("DELETE FROM shard_directory WHERE owner_id = ?").bind(merchant.merchantId);
    await expect(forget.run()).rejects.toThrow(/shard_assignment_immutable/);
    const again = env.DB.prepare(
      "INSERT INTO shard_directory (owner_kind, owner_id, shard, assigned_at) VALUES ('merchant', ?, 1, '')",
    ).bind(merchant.merchantId);
    await expect(again.run()).rejects.toThrow(/UNIQUE|PRIMARY KEY/);
    expect(await homeShard(env, "merchant", merchant.merchantId)).toBe(0);
  });

  it("answers an error, not shard 0, for an owner it does not know", async () => {
    await expect(homeShard(env, "agent", newId("agent", CONTROL_IDS))).rejects.toThrow(/no shard in the directory/);
  });
});

describe("a sequencer per shard", () => {
  it("refuses a plan for another shard before writing anything", async () => {
    const agent = await createAgent();
    const plan = credit(agent.agentId, 100);
    const stub = env.LEDGER.getByName(ledgerName(0));
    // Shard 0's object has committed before (its shard is pinned); a plan stamped for shard 1 is refused.
    await ledgerOf(env, 0).commit(credit(agent.agentId, 1));
    await expect(
      runInDurableObject(stub, (instance) =>
        (instance as unknown as LedgerDurableObject).commit({ ...plan, shard: 1 }),
      ),
    ).rejects.toThrow(/plan for ledger shard 1 reached the sequencer of shard 0/);
    const credited = await env.DB.prepare("SELECT balance_minor AS b FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first<{ b: number }>();
    expect(credited!.b).toBe(1);
  });

  it("commits shard 1's plans in shard 1's database, on a chain of its own from its own genesis", async () => {
    const agent = await createAgent();
    // An account row in shard 1 with the agent's id: what an agent placed there has.
    await ensureHomeRow(env, "agent", agent.agentId, 1);
    const shard1 = dbOfShard(env, 1);
    const before = await shard1.prepare("SELECT COUNT(*) AS n FROM audit_events").first<{ n: number }>();
    const result = await ledgerOf(env, 1).commit(credit(agent.agentId, 250));
    expect(result.kind).toBe("committed");
    const home = await shard1.prepare("SELECT balance_minor AS b FROM agents WHERE id = ?").bind(agent.agentId).first();
    expect(home).toEqual({ b: 250 });
    // Shard 0's row of the same agent did not move.
    const control = await env.DB.prepare("SELECT balance_minor AS b FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first();
    expect(control).toEqual({ b: 0 });
    const sum = await shard1.prepare("SELECT COALESCE(SUM(amount_minor), 0) AS s FROM ledger_entries").first();
    expect(sum).toEqual({ s: 0 });

    expect(genesisHashOf(0)).toBe(GENESIS_HASH);
    expect(genesisHashOf(1)).not.toBe(GENESIS_HASH);
    const rows = (await dbOf(shard1).query.auditEvents.findMany({ orderBy: (t, { asc }) => [asc(t.seq)] })).map(
      auditRowOf,
    );
    expect(rows.length).toBe(before!.n + 1);
    expect(rows[0]!.prevHash).toBe(genesisHashOf(1));
    expect((await verifyChain(rows, { seq: 0, hash: genesisHashOf(1) })).ok).toBe(true);
    // Shard 1's chain does not verify from shard 0's genesis: its rows cannot be passed off as shard 0's.
    expect((await verifyChain(rows)).ok).toBe(false);
    const stats = await ledgerOf(env, 1).stats();
    expect(stats.shard).toBe(1);
  });
});

describe("LEDGER_SHARDS and LEDGER_SHARD_PLACEMENT", () => {
  const parse = (vars: Record<string, string>) => settingsOf({ ...env, ...vars } as typeof env);
  it("default to one shard, new owners spread over the shards", () => {
    const s = parse({});
    expect(s.ledgerShards).toBe(Number(env.LEDGER_SHARDS));
    expect(parse({ LEDGER_SHARD_PLACEMENT: "spread" }).shardPlacement).toEqual({ kind: "spread" });
    expect(parse({ LEDGER_SHARDS: "2", LEDGER_SHARD_PLACEMENT: "fixed:1" }).shardPlacement).toEqual({
      kind: "fixed",
      shard: 1,
    });
  });
  it("refuse a count that is not a whole number from 1 and a placement on a shard not run; production runs several", () => {
    for (const bad of ["", "0", "0x2", "1e1", "65"])
      expect(() => parse({ LEDGER_SHARDS: bad })).toThrow(/LEDGER_SHARDS/);
    expect(() => parse({ LEDGER_SHARD_PLACEMENT: "fixed:1" })).toThrow(/names shard 1 of 1/);
    expect(() => parse({ LEDGER_SHARD_PLACEMENT: "round_robin" })).toThrow(/LEDGER_SHARD_PLACEMENT/);
    // Every money path commits on its owner's shard, so production may run more than one: this test
    // environment's development secrets are refused there, its two shards are not.
    const production = () => parse({ ENVIRONMENT: "production", LEDGER_SHARDS: "2" });
    expect(production).toThrow(/Invalid configuration: .*development/);
    expect(production).not.toThrow(/LEDGER_SHARD/);
  });
});
