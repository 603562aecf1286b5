import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevServer, startDevServer } from "./dev-server";
import { shardOwners } from "./shard-owners";

// `npm run dev` with two ledger shards (DEV_LEDGER_SHARDS=2), from outside as a client sees it:
// payments and refunds within and across shards, the chains of both verifying, the export naming them.
describe("npm run dev with two ledger shards", () => {
  let dev: DevServer;
  let token: string;
  beforeAll(async () => {
    dev = await startDevServer({ DEV_LEDGER_SHARDS: "2", DEV_LEDGER_SHARD_PLACEMENT: "spread" });
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
  });
  afterAll(async () => {
    await dev?.stop();
  });

  it("pays and refunds within and across shards, and both chains verify", async () => {
    const { call, charge, merchantsOfEachShard, agentsOfEachShard } = shardOwners(dev, token);
    const [m0, m1] = await merchantsOfEachShard();
    const [a0, a1] = await agentsOfEachShard(m0);
    const balance = async (agent: { apiKey: string }) =>
      (await call("GET", "/balance", agent.apiKey)).body.balanceMinor;
    const merchantBalance = async (key: string) => (await call("GET", "/merchant/me", key)).body.merchant.balanceMinor;
    const [a0Before, a1Before, m0Before, m1Before] = [
      await balance(a0),
      await balance(a1),
      await merchantBalance(m0),
      await merchantBalance(m1),
    ];

    // Across both ways, and within shard 1.
    const across01 = await charge(m1, 700);
    const across10 = await charge(m0, 400);
    const within1 = await charge(m1, 250);
    for (const [agent, chargeId] of [
      [a0, across01],
      [a1, across10],
      [a1, within1],
    ] as const) {
      const paid = await call("POST", `/charges/${chargeId}/pay`, agent.apiKey);
      expect(paid.status, paid.text).toBe(200);
      expect(paid.body.charge).toMatchObject({ chargeId, status: "paid", agentId: agent.agentId });
    }
    // A refund of part of the cross-shard payment reaches the agent's wallet in the other shard.
    const refund = await call("POST", `/merchant/charges/${across01}/refunds`, m1, { amountUsdCents: 300 });
    expect(refund.status, refund.text).toBe(201);
    expect(refund.body.refund).toMatchObject({ status: "succeeded", amountMinor: 300 });

    expect(await balance(a0)).toBe(a0Before - 700 + 300);
    expect(await balance(a1)).toBe(a1Before - 400 - 250);
    expect(await merchantBalance(m0)).toBe(m0Before + 400);
    expect(await merchantBalance(m1)).toBe(m1Before + 700 + 250 - 300);

    const verdict = await call("GET", "/console/audit/verify?full=true", token);
    expect(verdict.status).toBe(200);
    expect(verdict.body.ok).toBe(true);
    expect(verdict.body.shards.map((s: { shard: number; ok: boolean }) => [s.shard, s.ok])).toEqual([
      [0, true],
      [1, true],
    ]);

    const day = new Date().toISOString().slice(0, 10);
    const csv = await call("GET", `/export/transactions.csv?from=${day}&to=${day}`, token);
    expect(csv.status).toBe(200);
    const lines = csv.text.trim().split("\r\n");
    // The shard column, then the exact amount last.
    expect(lines[0]!.endsWith(",shard,amountBaseUnits")).toBe(true);
    const paidRow = lines.find((l) => l.includes(`,charge.paid,`) && l.includes(across01));
    expect(paidRow?.split(",").at(-2)).toBe("1");
  });
});
