import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { type Account, centsPosting, postingStatements } from "../../src/ledger/postings";
import { nowIso } from "../../src/lib/time";
import { agentOn, entrySum, expectShardsAtRest, homeBalance, merchantOn } from "./helpers";

// An owner's entries are written only where its balance row lives: in its home shard. A plan that
// posts to an owner elsewhere (a path not yet moved to shards, say) fails loudly and writes nothing.

// Awaited inside: the RPC's own promise, handed to `expect` as it is, is reported unhandled as well.
const postOn = async (shard: number, from: Account, to: Account, amountMinor: number) =>
  await ledgerOf(env, shard).commit({
    statements: postingStatements(`t_${crypto.randomUUID()}`, [centsPosting(from, to, amountMinor)], nowIso()),
    audit: [],
  });

describe("ledger entries only in the owner's home shard", () => {
  it("refuses entries of a shard-1 owner on shard 0 (its control row) and of a shard-0 owner on shard 1 (no row)", async () => {
    const agent1 = await agentOn(1, { credit: 500 });
    const merchant1 = await merchantOn(1);
    const agent0 = await agentOn(0, { credit: 500 });
    const merchant0 = await merchantOn(0);
    const sums = [await entrySum(0), await entrySum(1)];

    // Credits from outside (as a deposit or an x402 payment posts them): on shard 0 to a shard-1
    // owner's control row, and on shard 1 to shard-0 owners, which have no row there.
    for (const [shard, account] of [
      [0, `agent:${agent1.agentId}`],
      [0, `merchant:${merchant1.merchantId}`],
      [1, `agent:${agent0.agentId}`],
      [1, `merchant:${merchant0.merchantId}`],
    ] as const)
      await expect(postOn(shard, "external:test", account, 100), `${account} on shard ${shard}`).rejects.toThrow(
        /ledger_account_not_at_home/,
      );
    expect([await entrySum(0), await entrySum(1)]).toEqual(sums);
    expect(await homeBalance("agent", agent0.agentId)).toBe(500);
    expect(await homeBalance("agent", agent1.agentId)).toBe(500);

    // At home, the same postings go through.
    await postOn(0, `agent:${agent0.agentId}`, `merchant:${merchant0.merchantId}`, 100);
    await postOn(1, `agent:${agent1.agentId}`, `merchant:${merchant1.merchantId}`, 100);
    expect(await homeBalance("merchant", merchant0.merchantId)).toBe(100);
    expect(await homeBalance("merchant", merchant1.merchantId)).toBe(100);
    await expectShardsAtRest();
  });
});
