import { expect } from "vitest";
import type { DevServer } from "./dev-server";

/*
 * Merchants and agents on each ledger shard of an `npm run dev` with two shards, found from outside as
 * a client would: new owners are placed at random, and the ids they produce say where they live.
 */

/** The shard an id names: `chg_s1_…` and `PAY_S1_…` are shard 1's, untagged ids shard 0's. */
export const shardOf = (id: string) => Number(/_s(\d+)_/i.exec(id)?.[1] ?? 0);

export function shardOwners(dev: DevServer, token: string) {
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

  /** A merchant of each shard: a charge's id says where. */
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

  return { call, charge, merchantsOfEachShard, agentsOfEachShard };
}
