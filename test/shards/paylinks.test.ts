import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { recoverTransfers } from "../../src/ledger/transfer-recovery";
import { setFaultHook } from "../../src/lib/faults";
import { api } from "../helpers/api";
import { injectOnce } from "../helpers/faults";
import {
  agentOn,
  chargePaidRows,
  expectShardsAtRest,
  homeBalance,
  inFlight,
  merchantOn,
  paymentEvents,
} from "./helpers";

/*
 * PayLinks with two ledger shards: the link and its grants live in the merchant's shard (ids naming
 * it); a draw is one batch when the agent lives there too, and a transfer through transit accounts
 * otherwise, the grant's figures guarded and moved in the arrival on the merchant's shard.
 */

afterEach(() => setFaultHook(null));

const newPaylink = async (merchantKey: string, body: Record<string, unknown>) => {
  const res = await api("POST", "/merchant/paylinks", { token: merchantKey, body });
  expect(res.status).toBe(201);
  return res.body as { paylinkId: string; code: string };
};
const accept = (agentKey: string, code: string) => api("POST", `/pl/${code}/accept`, { token: agentKey });
const draw = (merchantKey: string, code: string, agentId: string, amountUsdCents: number, key?: string) =>
  api("POST", `/merchant/paylinks/${code}/charge`, {
    token: merchantKey,
    body: { agentId, amountUsdCents },
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });
const grantRow = (grantId: string) =>
  dbOfShard(env, shardOfId(grantId))
    .prepare("SELECT spent_minor AS spent, uses FROM paylink_grants WHERE id = ?")
    .bind(grantId)
    .first<{ spent: number; uses: number }>();

async function setUp(merchantShard: number, agentShard: number, body: Record<string, unknown>, credit = 1_000) {
  const merchant = await merchantOn(merchantShard);
  const agent = await agentOn(agentShard, { credit });
  const pl = await newPaylink(merchant.apiKey, body);
  expect(shardOfId(pl.paylinkId)).toBe(merchantShard);
  expect(shardOfId(pl.code)).toBe(merchantShard);
  const accepted = await accept(agent.apiKey, pl.code);
  expect(accepted.status).toBe(200);
  const grantId = accepted.body.grantId as string;
  expect(shardOfId(grantId)).toBe(merchantShard);
  return { merchant, agent, pl, grantId };
}

const PAIRS: [number, number][] = [
  [1, 1],
  [0, 1],
  [1, 0],
];

describe("PayLinks across ledger shards", () => {
  for (const [m, a] of PAIRS) {
    it(`merchant in ${m}, agent in ${a}: the link, grant and draws on the merchant's shard, money moved once`, async () => {
      const { merchant, agent, pl, grantId } = await setUp(m, a, { budgetUsdCents: 500, perChargeUsdCents: 300 });
      // The public view and a second accept read the link's shard.
      expect((await api("GET", `/pl/${pl.code}`)).body).toMatchObject({ paylinkId: pl.paylinkId, remainingMinor: 500 });
      expect((await accept(agent.apiKey, pl.code)).body.grantId).toBe(grantId);

      const first = await draw(merchant.apiKey, pl.code, agent.agentId, 200);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ spentMinor: 200, remainingMinor: 300, exhausted: false });
      const chargeId = first.body.charge.chargeId as string;
      expect(shardOfId(chargeId)).toBe(m);
      expect(first.body.charge).toMatchObject({ status: "paid", method: "paylink" });
      const stored = await dbOfShard(env, m)
        .prepare("SELECT agent_id AS agentId, paylink_grant_id AS grantId FROM charges WHERE id = ?")
        .bind(chargeId)
        .first<{ agentId: string; grantId: string }>();
      expect(stored).toEqual({ agentId: agent.agentId, grantId });
      expect((await draw(merchant.apiKey, pl.code, agent.agentId, 400)).body.error).toBe("excede_tope_por_uso");
      const keyed = await draw(merchant.apiKey, pl.code, agent.agentId, 300, `draw-${m}-${a}`);
      expect(keyed.status).toBe(200);
      // The key replays the answer stored on the agent's home shard, and draws nothing more.
      expect((await draw(merchant.apiKey, pl.code, agent.agentId, 300, `draw-${m}-${a}`)).text).toBe(keyed.text);
      const over = await draw(merchant.apiKey, pl.code, agent.agentId, 1);
      expect(over.status).toBe(409);
      expect(over.body.error).toBe("paylink_exhausted");

      expect(await grantRow(grantId)).toEqual({ spent: 500, uses: 2 });
      expect(await homeBalance("agent", agent.agentId)).toBe(500);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(500);
      expect((await api("GET", `/pl/${pl.code}`)).body).toMatchObject({ uses: 2, remainingMinor: 0 });
      expect(await paymentEvents(chargeId)).toEqual(["charge.succeeded", "payment.succeeded"]);
      expect(await chargePaidRows(chargeId)).toHaveLength(1);
      const charge = await api("GET", `/charges/${chargeId}`);
      expect(charge.body.status).toBe("paid");
      // The exhausted event goes to the merchant's shard's outbox.
      const exhausted = await dbOfShard(env, m)
        .prepare("SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'budget.exhausted' AND data LIKE ?")
        .bind(`%${grantId}%`)
        .first<{ n: number }>();
      expect(exhausted!.n).toBe(1);
      await expectShardsAtRest();
    });
  }

  it("another merchant's PayLink is still 404 to a draw, on either shard", async () => {
    const { pl, agent } = await setUp(1, 0, { budgetUsdCents: 500 });
    const other = await merchantOn(0);
    expect((await draw(other.apiKey, pl.code, agent.agentId, 100)).status).toBe(404);
    const stranger = await merchantOn(1);
    expect((await draw(stranger.apiKey, pl.code, agent.agentId, 100)).status).toBe(404);
    expect((await api("GET", "/pl/plc_s1_aaaaaaaaaaaaaaaaaaaaaaaa")).status).toBe(404);
  });

  it("a frozen agent cannot accept a link on another shard, the freeze read on its home shard", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 100 });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 100 });
    const { consoleToken } = await import("../helpers/api");
    const token = await consoleToken();
    expect((await api("POST", `/console/agents/${agent.agentId}/freeze`, { token, body: {} })).status).toBe(200);
    const refused = await accept(agent.apiKey, pl.code);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe("agent_frozen");
  });

  for (const [m, a] of [
    [0, 1],
    [1, 0],
    [1, 1],
  ] as [number, number][]) {
    it(`concurrent draws on one grant (merchant ${m}, agent ${a}) never exceed its budget`, async () => {
      const { merchant, agent, pl, grantId } = await setUp(m, a, { budgetUsdCents: 1_000 }, 5_000);
      const results = await Promise.all(
        Array.from({ length: 8 }, () => draw(merchant.apiKey, pl.code, agent.agentId, 300)),
      );
      const paid = results.filter((r) => r.status === 200);
      expect(paid).toHaveLength(3);
      for (const r of results) if (r.status !== 200) expect([402, 409]).toContain(r.status);
      expect(await grantRow(grantId)).toEqual({ spent: 900, uses: 3 });
      expect(await homeBalance("agent", agent.agentId)).toBe(4_100);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(900);
      await expectShardsAtRest();
    });
  }

  for (const how of ["alarm", "cron"] as const) {
    it(`a crash after the send of a draw across shards is finished by the ${how}, once`, async () => {
      const [m, a] = how === "alarm" ? [1, 0] : [0, 1];
      const { merchant, agent, pl, grantId } = await setUp(m, a, { budgetUsdCents: 1_000 });
      const fired = injectOnce("transfer.after_send", "abort");
      const first = await draw(merchant.apiKey, pl.code, agent.agentId, 250, `draw-fault-${how}`);
      expect(fired()).toBe(true);
      setFaultHook(null);
      expect(first.status).toBe(500);
      expect(await inFlight()).toBe(250);
      if (how === "alarm") await runDurableObjectAlarm(env.WALLET.getByName(agent.agentId));
      else await recoverTransfers(env, Date.now() + 120_000);
      expect(await inFlight()).toBe(0);
      expect(await grantRow(grantId)).toEqual({ spent: 250, uses: 1 });
      // The retry under the same key is answered with the draw that landed, never drawn twice.
      const retry = await draw(merchant.apiKey, pl.code, agent.agentId, 250, `draw-fault-${how}`);
      expect(retry.status).toBe(200);
      expect(retry.body).toMatchObject({ paid: true, spentMinor: 250, remainingMinor: 750 });
      expect(await grantRow(grantId)).toEqual({ spent: 250, uses: 1 });
      expect(await homeBalance("agent", agent.agentId)).toBe(750);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(250);
      // The grant object forgot the draw it could not see land: the next draw is decided on the committed figures.
      const next = await draw(merchant.apiKey, pl.code, agent.agentId, 750);
      expect(next.status).toBe(200);
      expect(next.body).toMatchObject({ spentMinor: 1_000, remainingMinor: 0, exhausted: true });
      await expectShardsAtRest();
    });
  }

  for (const point of ["transfer.after_arrive", "transfer.before_settle", "ledger.after_batch"] as const) {
    it(`a draw across shards failing at ${point} is settled once by the cron, the grant counting it once`, async () => {
      const { merchant, agent, pl, grantId } = await setUp(0, 1, { budgetUsdCents: 1_000 });
      const fired = injectOnce(point, "throw");
      const first = await draw(merchant.apiKey, pl.code, agent.agentId, 400);
      expect(fired()).toBe(true);
      setFaultHook(null);
      expect([200, 500]).toContain(first.status);
      await recoverTransfers(env, Date.now() + 120_000);
      expect(await grantRow(grantId)).toEqual({ spent: 400, uses: 1 });
      expect(await homeBalance("agent", agent.agentId)).toBe(600);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(400);
      const rest = await draw(merchant.apiKey, pl.code, agent.agentId, 600);
      expect(rest.status).toBe(200);
      expect(rest.body).toMatchObject({ spentMinor: 1_000, exhausted: true });
      await expectShardsAtRest();
    });
  }
});
