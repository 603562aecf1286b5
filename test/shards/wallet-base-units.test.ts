import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { dbOfShard } from "../../src/db/shards";
import { api } from "../helpers/api";
import { payCharge } from "../helpers/factories";
import { pendingBelowACent } from "../helpers/sub-cent";
import { agentOn, expectChainVerifies, merchantOn, pendingTransfers } from "./helpers";

/*
 * A wallet payment of an amount that is not whole cents, with two ledger shards: within one shard it
 * is one batch and exact; across shards it is refused before anything is written (a transfer row
 * counts whole cents).
 */

const exactBalance = async (agentKey: string) =>
  (await api("GET", "/balance", { token: agentKey })).body.balanceBaseUnits as string;

/**
 * At rest, exactly: per shard the entries sum to zero in base units and every balance is the sum of its
 * entries (cents columns are truncated per entry, so they do not add up under amounts below a cent).
 */
async function expectExactlyAtRest() {
  expect(await pendingTransfers()).toBe(0);
  for (const k of [0, 1]) {
    const db = dbOfShard(env, k);
    const sum = await db
      .prepare("SELECT CAST(COALESCE(SUM(amount_base_units), 0) AS TEXT) AS s FROM ledger_entries")
      .first<{ s: string }>();
    expect(sum!.s).toBe("0");
    const mismatched = await db
      .prepare(
        `SELECT a.id FROM agents a WHERE a.balance_base_units != COALESCE((SELECT SUM(amount_base_units) FROM ledger_entries WHERE account = 'agent:' || a.id), 0)
         UNION ALL SELECT m.id FROM merchants m WHERE m.balance_base_units != COALESCE((SELECT SUM(amount_base_units) FROM ledger_entries WHERE account = 'merchant:' || m.id), 0)`,
      )
      .all();
    expect(mismatched.results).toEqual([]);
    await expectChainVerifies(k);
  }
}

const transferCount = async () => {
  let n = 0;
  for (const k of [0, 1])
    n += (await dbOfShard(env, k).prepare("SELECT COUNT(*) AS n FROM ledger_transfers").first<{ n: number }>())!.n;
  return n;
};

describe("a wallet payment below a cent with two ledger shards", () => {
  it("within shard 1 pays the exact amount", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(1, { credit: 1 });
    const chargeId = await pendingBelowACent(merchant.merchantId, 1_500n);
    const paid = await payCharge(agent.apiKey, chargeId);
    expect(paid.status).toBe(200);
    expect(paid.body.charge).toMatchObject({ status: "paid", amountMinor: null, amountBaseUnits: "1500" });
    expect(await exactBalance(agent.apiKey)).toBe("8500");
  });

  it("across shards is refused with 409 cross_shard_amount_not_whole_cents, nothing written", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 1 });
    const transfersBefore = await transferCount();
    const chargeId = await pendingBelowACent(merchant.merchantId, 1_500n);
    const refused = await payCharge(agent.apiKey, chargeId);
    expect({ status: refused.status, error: refused.body.error }).toEqual({
      status: 409,
      error: "cross_shard_amount_not_whole_cents",
    });
    expect(await exactBalance(agent.apiKey)).toBe("10000");
    expect((await api("GET", `/charges/${chargeId}`)).body.status).toBe("pending");
    expect(await transferCount()).toBe(transfersBefore);
    // The refusal held nothing back: a whole-cent payment across the same shards still goes.
    const whole = await pendingBelowACent(merchant.merchantId, 10_000n);
    expect((await payCharge(agent.apiKey, whole)).status).toBe(200);
    expect(await exactBalance(agent.apiKey)).toBe("0");
    await expectExactlyAtRest();
  });
});
