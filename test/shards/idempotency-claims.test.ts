import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { agentOn, expectShardsAtRest, homeBalance, merchantOn } from "./helpers";

/*
 * An Idempotency-Key names one request, whichever shard its reservation lives in. A PayLink draw's
 * key is reserved in the drawn agent's home shard, which the body names: the same key on a draw for
 * an agent in the other shard is still 409 `idempotency_key_reused` (control holds each key's claim),
 * and a request that kept no answer (a 400) frees its key for the corrected request.
 */

const draw = (merchantKey: string, code: string, agentId: string, amountUsdCents: number | string, key: string) =>
  api("POST", `/merchant/paylinks/${code}/charge`, {
    token: merchantKey,
    body: { agentId, amountUsdCents },
    headers: { "idempotency-key": key },
  });

describe("Idempotency-Keys whose reservation the body routes to a shard", () => {
  it("refuse the same key on a draw for an agent in the other shard, and free a key whose request kept nothing", async () => {
    const merchant = await merchantOn(0);
    const [a0, a1] = [await agentOn(0, { credit: 1_000 }), await agentOn(1, { credit: 1_000 })];
    const created = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 900 } });
    expect(created.status).toBe(201);
    const code = created.body.code as string;
    for (const agent of [a0, a1])
      expect((await api("POST", `/pl/${code}/accept`, { token: agent.apiKey })).status).toBe(200);

    const first = await draw(merchant.apiKey, code, a0.agentId, 10, "K-draw");
    expect(first.status).toBe(200);
    for (const [agent, amount] of [
      [a1, 10],
      [a0, 20],
      [a1, 25],
    ] as const)
      expect((await draw(merchant.apiKey, code, agent.agentId, amount, "K-draw")).body).toEqual({
        error: "idempotency_key_reused",
      });
    // The same request again replays its answer.
    const again = await draw(merchant.apiKey, code, a0.agentId, 10, "K-draw");
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(first.text);
    expect(await homeBalance("agent", a0.agentId)).toBe(990);
    expect(await homeBalance("agent", a1.agentId)).toBe(1_000);

    // A request refused by validation keeps nothing: its key serves the corrected request, in the other shard.
    expect((await draw(merchant.apiKey, code, a1.agentId, "ten", "K-fix")).status).toBe(400);
    expect((await draw(merchant.apiKey, code, a1.agentId, 30, "K-fix")).status).toBe(200);
    expect(await homeBalance("agent", a1.agentId)).toBe(970);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(40);
    await expectShardsAtRest();
  });
});
