import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "./dev-server";

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

  const call = async (method: string, path: string, key: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        connection: "close",
        ...(body ? { "content-type": "application/json" } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return {
      status: res.status,
      text,
      body: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : null,
    };
  };
  const charge = async (merchantKey: string, amountUsdCents: number) => {
    const res = await call("POST", "/merchant/charges", merchantKey, { amountUsdCents });
    expect(res.status).toBe(201);
    return res.body.chargeId as string;
  };
  /** The shard an id names: `chg_s1_…` and `PAY_S1_…` are shard 1's, untagged ids shard 0's. */
  const shardOf = (id: string) => Number(/_s(\d+)_/i.exec(id)?.[1] ?? 0);

  /** A merchant of each shard: new merchants are placed at random, and a charge's id says where. */
  async function merchantsOfEachShard() {
    const found = new Map<number, string>();
    for (let i = 0; i < 40 && found.size < 2; i++) {
      const res = await call("POST", "/merchants", token, { name: `shop ${i}` });
      expect(res.status).toBe(201);
      const key = res.body.apiKey as string;
      const shard = shardOf(await charge(key, 1));
      if (!found.has(shard)) found.set(shard, key);
    }
    expect(found.size).toBe(2);
    return [found.get(0)!, found.get(1)!] as const;
  }

  /** An agent of each shard, credited: its first payment's reference says where its wallet lives. */
  async function agentsOfEachShard(probeMerchant: string) {
    const found = new Map<number, { agentId: string; apiKey: string }>();
    for (let i = 0; i < 40 && found.size < 2; i++) {
      const res = await call("POST", "/console/agents", token, { name: `agent ${i}` });
      expect(res.status).toBe(201);
      const agent = res.body as { agentId: string; apiKey: string };
      const credit = await call("POST", `/console/agents/${agent.agentId}/credits`, token, { amountUsdCents: 10_000 });
      expect(credit.status).toBe(200);
      const paid = await call("POST", `/charges/${await charge(probeMerchant, 100)}/pay`, agent.apiKey);
      expect(paid.status).toBe(200);
      const shard = shardOf(paid.body.charge.reference);
      if (!found.has(shard)) found.set(shard, agent);
    }
    expect(found.size).toBe(2);
    return [found.get(0)!, found.get(1)!] as const;
  }

  it("pays and refunds within and across shards, and both chains verify", async () => {
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
    expect(lines[0]!.endsWith(",shard")).toBe(true);
    const paidRow = lines.find((l) => l.includes(`,charge.paid,`) && l.includes(across01));
    expect(paidRow?.endsWith(",1")).toBe(true);
  });
});
