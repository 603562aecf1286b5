import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { laneOf, settlerOf } from "../../src/x402/settler.do";
import { api, consoleToken } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { freshPayer, publicClient, relayedSends, tokenBalance, xPaymentFor } from "../helpers/x402";

/*
 * Settlement lanes (project "workers-lanes": this Worker has every gas key of
 * the local chain). One key's sends go one at a time, each after the node
 * answered the one before; several keys are several such lanes, and the
 * built-in facilitator spreads settlements over them in turn.
 */
describe("settlement lanes", () => {
  it("16 settlements at once go out over every gas key in turn, each key's nonces gap-free and in order, each credited once", async () => {
    const lanes = settingsOf(env).x402!.facilitatorPrivateKeys.map((key) =>
      privateKeyToAccount(key).address.toLowerCase(),
    );
    expect(lanes.length).toBeGreaterThanOrEqual(3);
    const merchant = await createMerchant();
    const cents = 100;
    const count = lanes.length * 4;
    const payer = await freshPayer(BigInt(count * cents) * 10_000n);
    const charges = await Promise.all(Array.from({ length: count }, () => createCharge(merchant.apiKey, cents)));
    const headers = await Promise.all(
      charges.map(
        async (c) => (await xPaymentFor(`/charges/${c.chargeId}/x402`, payer.key, BigInt(cents) * 10_000n)).header,
      ),
    );
    const before = await merchantBalance(merchant.apiKey);

    const responses = await Promise.all(
      charges.map((c, i) => api("GET", `/charges/${c.chargeId}/x402`, { headers: { "X-PAYMENT": headers[i]! } })),
    );

    expect(
      responses.map((r) => r.status),
      JSON.stringify(responses.map((r) => r.body.invalidReason ?? r.body.error)),
    ).toEqual(Array(count).fill(200));
    const hashes = responses.map((r) => r.body.settlement.transaction as Hex);
    expect(new Set(hashes).size).toBe(count);
    const sent = await Promise.all(hashes.map((hash) => publicClient().getTransaction({ hash })));
    const receipts = await Promise.all(hashes.map((hash) => publicClient().getTransactionReceipt({ hash })));
    expect(receipts.map((r) => r.status)).toEqual(Array(count).fill("success"));
    // In turn: every key sent the same number, and only configured keys sent.
    const byLane = new Map<string, typeof sent>();
    for (const t of sent) byLane.set(t.from.toLowerCase(), [...(byLane.get(t.from.toLowerCase()) ?? []), t]);
    expect([...byLane.keys()].sort()).toEqual([...lanes].sort());
    for (const lane of lanes) expect(byLane.get(lane)).toHaveLength(4);
    // Within a key: consecutive nonces, each handed to the node only after it answered the one before.
    const relayed = await relayedSends();
    for (const [, txs] of byLane) {
      const nonces = txs.map((t) => t.nonce).sort((a, b) => a - b);
      expect(nonces).toEqual(nonces.map((_, i) => nonces[0]! + i));
      const own = relayed.filter((s) => txs.some((t) => t.hash === s.hash)).sort((a, b) => a.nonce - b.nonce);
      expect(own).toHaveLength(4);
      for (let i = 1; i < own.length; i++) expect(own[i]!.arrived).toBeGreaterThan(own[i - 1]!.answered);
    }
    expect(await tokenBalance(payer.address)).toBe(0n);
    expect(await merchantBalance(merchant.apiKey)).toBe(before + count * cents);
    const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
    expect(verify.body.ok).toBe(true);
  });

  it("a lane whose send fails (its key out of gas) is passed over: one payment waits for reconciliation, the rest settle on the others", async () => {
    const lanes = settingsOf(env).x402!.facilitatorPrivateKeys.map((key) => privateKeyToAccount(key).address);
    const broken = lanes[2]!;
    const merchant = await createMerchant();
    const cents = 100;
    const payer = await freshPayer(BigInt(8 * cents) * 10_000n);
    const charges = await Promise.all(Array.from({ length: 8 }, () => createCharge(merchant.apiKey, cents)));
    const gas = await publicClient().getBalance({ address: broken });
    await publicClient().request({ method: "anvil_setBalance" as never, params: [broken, "0x0"] as never });
    try {
      // One at a time, so the turn passes every lane twice unless a failed one is passed over.
      const responses = [];
      for (const charge of charges) {
        const { header } = await xPaymentFor(`/charges/${charge.chargeId}/x402`, payer.key, BigInt(cents) * 10_000n);
        responses.push(await api("GET", `/charges/${charge.chargeId}/x402`, { headers: { "X-PAYMENT": header } }));
      }
      expect(responses.map((r) => r.status).sort()).toEqual([...Array(7).fill(200), 202]);
      const settled = await Promise.all(
        responses
          .filter((r) => r.status === 200)
          .map((r) => publicClient().getTransaction({ hash: r.body.settlement.transaction as Hex })),
      );
      expect(settled.map((t) => t.from.toLowerCase())).not.toContain(broken.toLowerCase());
      expect(responses.find((r) => r.status === 202)!.body).toMatchObject({ status: "pending" });
      expect(await tokenBalance(payer.address)).toBe(BigInt(cents) * 10_000n);
    } finally {
      await publicClient().request({
        method: "anvil_setBalance" as never,
        params: [broken, `0x${gas.toString(16)}`] as never,
      });
    }
  });

  it("a lane sends only for its own key, and the watcher for none: two senders for one key would reuse its nonces", async () => {
    const [a, b] = settingsOf(env).x402!.facilitatorPrivateKeys.map((key) => privateKeyToAccount(key).address);
    const prepared = { data: "0x" as Hex, gas: 21_000n, fees: { maxFeePerGas: 2n, maxPriorityFeePerGas: 1n } };
    const relayedBefore = (await relayedSends()).length;
    const mismatch = { kind: "rejected", reason: "settler_lane_mismatch" };
    expect(await laneOf(env, a!).broadcast(prepared, b!)).toEqual(mismatch);
    expect(await settlerOf(env).broadcast(prepared, a!)).toEqual(mismatch);
    // A key that is not configured is no lane at all.
    const stranger = privateKeyToAccount(`0x${"7".repeat(64)}`).address;
    expect(await laneOf(env, stranger).broadcast(prepared, stranger)).toEqual({
      kind: "rejected",
      reason: "facilitator_not_configured",
    });
    expect((await relayedSends()).length).toBe(relayedBefore);
  });
});
