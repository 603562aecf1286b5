import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { afterEach, describe, expect, it } from "vitest";
import { setFaultHook } from "../../src/lib/faults";
import { RESEND_AFTER_MS } from "../../src/outbound/advance";
import { advanceDuePayouts } from "../../src/payouts/service";
import { api } from "../helpers/api";
import { merchantBalance } from "../helpers/factories";
import { injectOnceAwaited } from "../helpers/faults";
import { waitFor } from "../helpers/wait";
import {
  authorizationUsed,
  fundedMerchant,
  merchantLedger,
  outboxEventsOf,
  payoutEntries,
  payoutOf,
  transfersTo,
  treasury,
} from "./fixtures";

/**
 * A crash inside the send, which runs after the answer (waitUntil): before the broadcast with the
 * row already marked handed over, or after the broadcast before the outcome is recorded. The
 * answer is 201 either way; the cron's pass (run here with its clock moved past RESEND_AFTER_MS)
 * settles it from the chain, and nothing moves twice.
 */
afterEach(() => setFaultHook(null));

/** The cron's pass over payouts, at a time when every transfer touched until now is due again. */
const cronPass = () => advanceDuePayouts(env, treasury(), Date.now() + RESEND_AFTER_MS + 5_000);
const NOTHING = { confirmed: 0, failed: 0, waiting: 0 };

async function pay(m: { apiKey: string }, cents: number, key: string) {
  const headers = { "Idempotency-Key": key };
  const res = await api("POST", "/merchant/payouts", { token: m.apiKey, headers, body: { amountUsdCents: cents } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.payout.status).toBe("pending");
  return { res, id: res.body.payout.payoutId as string, headers };
}

/** What must not change when the cron passes again: the payout, its transfers, events and entries, the balance. */
async function snapshot(m: { apiKey: string; merchantId: string; address: Hex }, payoutId: string) {
  return {
    payout: await payoutOf(m.apiKey, payoutId),
    transfers: await transfersTo(m.address),
    paidEvents: await outboxEventsOf("payout.paid", payoutId),
    failedEvents: await outboxEventsOf("payout.failed", payoutId),
    entries: await payoutEntries(payoutId),
    ledger: await merchantLedger(m.merchantId),
  };
}

describe("a crash while a payout is sent", () => {
  it("after the broadcast, before recording: the transfer lands once; the cron and the retry record it paid once", async () => {
    const m = await fundedMerchant(900);
    const fired = injectOnceAwaited("outbound.after_send");
    const { res, id, headers } = await pay(m, 500, `after-send-${crypto.randomUUID()}`);
    await fired();
    const [onChain] = await waitFor(
      "the transfer on chain",
      () => transfersTo(m.address),
      (l) => l.length === 1,
    );
    // The crash came after the broadcast: nothing recorded it.
    expect((await payoutOf(m.apiKey, id)).status).toBe("pending");

    const retry = await api("POST", "/merchant/payouts", { token: m.apiKey, headers, body: { amountUsdCents: 500 } });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.text).toBe(res.text);

    expect(await cronPass()).toEqual({ ...NOTHING, confirmed: 1 });
    const after = await snapshot(m, id);
    expect(after.payout).toMatchObject({ status: "paid", transaction: onChain!.transaction, failureReason: null });
    expect(after.transfers).toEqual([{ transaction: onChain!.transaction, value: 5_000_000n }]);
    expect(after.paidEvents).toBe(1);
    expect(after.failedEvents).toBe(0);
    expect(after.entries.map((e) => e.transferId)).toEqual([id, id]);
    expect(after.ledger).toEqual({ cached: 400, entries: 400 });
    expect(await merchantBalance(m.apiKey)).toBe(400);
    expect((await api("GET", "/merchant/payouts", { token: m.apiKey })).body.payouts).toHaveLength(1);

    for (const _ of [1, 2]) expect(await cronPass()).toEqual(NOTHING);
    expect(await snapshot(m, id)).toEqual(after);
  });

  it("after marking it handed over, before the broadcast: nothing on chain until the cron sends it, once", async () => {
    const m = await fundedMerchant(700);
    const fired = injectOnceAwaited("outbound.before_send");
    const { id } = await pay(m, 700, `before-send-${crypto.randomUUID()}`);
    await fired();
    const row = await env.DB.prepare(
      "SELECT broadcast_at AS broadcastAt, status FROM outbound_transfers WHERE owner_id = ?",
    )
      .bind(id)
      .first<{ broadcastAt: string | null; status: string }>();
    expect(row!.status).toBe("pending");
    expect(row!.broadcastAt).not.toBeNull();
    expect(await transfersTo(m.address)).toEqual([]);
    expect(await authorizationUsed(id)).toBe(false);
    expect(await merchantBalance(m.apiKey)).toBe(0);

    // Not yet due: the cron leaves a transfer touched within RESEND_AFTER_MS to the worker that has it.
    expect(await advanceDuePayouts(env, treasury())).toEqual(NOTHING);
    expect(await cronPass()).toEqual({ ...NOTHING, confirmed: 1 });
    const after = await snapshot(m, id);
    expect(after.transfers).toHaveLength(1);
    expect(after.payout).toMatchObject({ status: "paid", transaction: after.transfers[0]!.transaction });
    expect(after.transfers[0]!.value).toBe(7_000_000n);
    expect(await authorizationUsed(id)).toBe(true);
    expect(after.paidEvents).toBe(1);
    expect(after.ledger).toEqual({ cached: 0, entries: 0 });

    for (const _ of [1, 2]) expect(await cronPass()).toEqual(NOTHING);
    expect(await snapshot(m, id)).toEqual(after);
  });

  it("an authorization that expired unused: the cron fails the payout authorization_expired and reverses it once", async () => {
    const m = await fundedMerchant(650);
    const fired = injectOnceAwaited("outbound.before_send");
    const { id } = await pay(m, 600, `expired-${crypto.randomUUID()}`);
    await fired();
    expect(await merchantBalance(m.apiKey)).toBe(50);
    // Handed over (as far as the row knows), never on chain, and now past its validBefore.
    await env.DB.prepare("UPDATE outbound_transfers SET valid_before = ? WHERE owner_id = ?")
      .bind(Math.floor(Date.now() / 1000) - 600, id)
      .run();

    expect(await cronPass()).toEqual({ ...NOTHING, failed: 1 });
    const after = await snapshot(m, id);
    expect(after.payout).toMatchObject({ status: "failed", transaction: null, failureReason: "authorization_expired" });
    expect(after.transfers).toEqual([]);
    expect(await authorizationUsed(id)).toBe(false);
    expect(after.failedEvents).toBe(1);
    expect(after.paidEvents).toBe(0);
    expect(after.entries).toEqual([
      { transferId: id, account: `merchant:${m.merchantId}`, amountMinor: -600 },
      { transferId: id, account: expect.stringMatching(/^external:payouts:/), amountMinor: 600 },
      { transferId: `${id}:reversal`, account: expect.stringMatching(/^external:payouts:/), amountMinor: -600 },
      { transferId: `${id}:reversal`, account: `merchant:${m.merchantId}`, amountMinor: 600 },
    ]);
    expect(after.ledger).toEqual({ cached: 650, entries: 650 });

    for (const _ of [1, 2]) expect(await cronPass()).toEqual(NOTHING);
    expect(await snapshot(m, id)).toEqual(after);
  });

  it("a transfer made for another token (the configured one changed) is never sent on this one", async () => {
    const m = await fundedMerchant(400);
    const fired = injectOnceAwaited("outbound.before_send");
    const { id } = await pay(m, 400, `other-token-${crypto.randomUUID()}`);
    await fired();
    // As if X402_ASSET had changed (or a local chain's token been deployed again) since the payout was made.
    await env.DB.prepare("UPDATE outbound_transfers SET asset = ? WHERE owner_id = ?")
      .bind("0x000000000000000000000000000000000000dead", id)
      .run();
    for (const _ of [1, 2]) expect(await cronPass()).toEqual({ ...NOTHING, waiting: 1 });
    expect(await transfersTo(m.address)).toEqual([]);
    expect(await authorizationUsed(id)).toBe(false);
    expect(await payoutOf(m.apiKey, id)).toMatchObject({ status: "pending" });
  });
});
