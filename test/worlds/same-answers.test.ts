import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { readOverviewOfShards } from "../../src/console/ui/queries";
import { api, consoleToken } from "../helpers/api";
import { createCharge, payCharge } from "../helpers/factories";
import { agentOn, merchantOn } from "../shards/helpers";

/*
 * One scripted world, run by the `workers` project (one ledger shard) and by `workers-shards` (two,
 * owners placed at random, so some payments cross): every answer below is written out, so both
 * runs must give the same ones, whatever shard each owner landed on.
 */

const today = () => new Date().toISOString().slice(0, 10);

/** The CSV export's rows of the given charges' payments, as (type, chargeId, agentId, amount), sorted. */
async function paidRowsOf(token: string, chargeIds: string[]) {
  const res = await api("GET", `/export/transactions.csv?from=${today()}&to=${today()}`, { token });
  expect(res.status).toBe(200);
  const lines = res.text.trim().split("\r\n");
  const columns = lines[0]!.split(",");
  const at = (name: string) => columns.indexOf(name);
  return lines
    .slice(1)
    .map((line) => line.split(","))
    .filter((f) => chargeIds.includes(f[at("chargeId")]!) && f[at("type")] === "charge.paid")
    .map((f) => [f[at("chargeId")], f[at("agentId")], Number(f[at("amountMinor")])])
    .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
}

describe(`the same world with ${settingsOf(env).ledgerShards} ledger shard(s)`, () => {
  it("answers the same balances, charges, refusals, console figures and export rows", async () => {
    const token = await consoleToken();
    // The figures the console's overview page shows.
    const overview = () => readOverviewOfShards(env);
    const before = await overview();

    // With two shards: A and x in shard 0, B, y and z in shard 1, so payments cross both ways.
    const at = (k: number) => k % settingsOf(env).ledgerShards;
    const [shopA, shopB] = [await merchantOn(at(0)), await merchantOn(at(1))];
    const [x, y, z] = [
      await agentOn(at(0), { credit: 10_000 }),
      await agentOn(at(1), { credit: 5_000 }),
      await agentOn(at(1), { credit: 1_000 }),
    ];
    const script: [typeof x, typeof shopA, number, number][] = [
      [x, shopA, 1_200, 200],
      [x, shopB, 800, 200],
      [y, shopA, 2_500, 200],
      [z, shopB, 1_500, 402],
      [y, shopB, 300, 200],
      [z, shopA, 1_000, 200],
      [z, shopB, 1, 402],
    ];
    const paid: string[] = [];
    for (const [agent, shop, amount, status] of script) {
      const charge = await createCharge(shop.apiKey, amount);
      const res = await payCharge(agent.apiKey, charge.chargeId);
      expect(res.status, `${amount} from an agent to a shop`).toBe(status);
      if (status === 200) paid.push(charge.chargeId);
      const read = await api("GET", `/charges/${charge.chargeId}`);
      expect(read.body.status).toBe(status === 200 ? "paid" : "pending");
    }
    // A charge is paid once: a second payment of it, by another agent, is refused.
    expect((await payCharge(y.apiKey, paid[0]!)).status).toBe(409);

    const balances = async () => ({
      x: (await api("GET", "/balance", { token: x.apiKey })).body.balanceMinor,
      y: (await api("GET", "/balance", { token: y.apiKey })).body.balanceMinor,
      z: (await api("GET", "/balance", { token: z.apiKey })).body.balanceMinor,
      a: (await api("GET", "/merchant/me", { token: shopA.apiKey })).body.merchant.balanceMinor,
      b: (await api("GET", "/merchant/me", { token: shopB.apiKey })).body.merchant.balanceMinor,
    });
    expect(await balances()).toEqual({ x: 8_000, y: 2_200, z: 0, a: 4_700, b: 1_100 });

    // The console's views of the same owners.
    const consoleAgent = async (id: string) =>
      (await api("GET", `/console/agents/${id}`, { token })).body as { balanceMinor: number; frozen: boolean };
    expect(await Promise.all([x, y, z].map((a) => consoleAgent(a.agentId)))).toEqual(
      [8_000, 2_200, 0].map((balanceMinor) => expect.objectContaining({ balanceMinor, frozen: false })),
    );
    const listed = (await api("GET", "/console/agents?limit=100", { token })).body as {
      agents: { agentId: string; balanceMinor: number }[];
    };
    expect([x, y, z].map((a) => listed.agents.find((l) => l.agentId === a.agentId)?.balanceMinor)).toEqual([
      8_000, 2_200, 0,
    ]);
    const shops = (await api("GET", "/console/merchants?limit=100", { token })).body as {
      merchants: { id: string; balanceMinor: number }[];
    };
    expect([shopA, shopB].map((m) => shops.merchants.find((l) => l.id === m.merchantId)?.balanceMinor)).toEqual([
      4_700, 1_100,
    ]);

    const after = await overview();
    expect({ n: after.paid.n - before.paid.n, cents: after.paid.cents - before.paid.cents }).toEqual({
      n: 5,
      cents: 5_800,
    });

    expect(await paidRowsOf(token, paid)).toEqual(
      [
        [paid[0], x.agentId, 1_200],
        [paid[1], x.agentId, 800],
        [paid[2], y.agentId, 2_500],
        [paid[3], y.agentId, 300],
        [paid[4], z.agentId, 1_000],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
  });
});
