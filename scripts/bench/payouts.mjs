// Payouts for the benchmark. POST /merchant/payouts answers 201 once the merchant is debited; the
// transfer leaves afterwards (signed by the settlement key, sent by a gas key's settler lane, its
// receipt awaited, then a batch marks the payout paid). So the row times payouts until paid, read
// from the bench Worker's `GET /__bench/payouts` (counts while waiting, the times once at the end).
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { call, createAgent, createCharges, createMerchant } from "./api.mjs";

/** A merchant with `cents` earned from one wallet payment, and a fresh payout address. */
export async function payoutMerchant(base, consoleKey, name, cents) {
  const merchant = await createMerchant(base, consoleKey, name);
  const agent = await createAgent(base, consoleKey, `${name} payer`, cents);
  const [chargeId] = await createCharges(base, merchant.apiKey, 1, 1, cents);
  await call(base, "POST", `/charges/${chargeId}/pay`, { token: agent.apiKey });
  const address = privateKeyToAccount(generatePrivateKey()).address;
  await call(base, "PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } });
  return { ...merchant, address };
}

const counts = (base, merchantId) => call(base, "GET", `/__bench/payouts?merchantId=${encodeURIComponent(merchantId)}`);

/**
 * Polls a merchant's payouts until `expected` of them are decided (paid or failed) and none is
 * pending, or `timeoutMs` passed (a transfer that missed its receipt waits for the cron's resend,
 * 30 s later). @returns {Promise<{ pending: number, paid: number, failed: number, timedOut: boolean }>}
 */
export async function untilDecided(base, merchantId, expected, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await counts(base, merchantId);
    if (now.pending === 0 && now.paid + now.failed >= expected) return { ...now, timedOut: false };
    if (Date.now() > deadline) return { ...now, timedOut: true };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/**
 * The row's result: `sent` payouts posted from `startedAt` (this process's clock; the service's
 * timestamps are the same machine's), of which `answered` (autocannon's result) were answered.
 * The rate counts payouts paid per second from the first POST to the last paid; p50/p99 are each
 * payout's time from its creation to paid. Errors are payouts not paid (refused, failed or still
 * pending). `accepted` is the 201 side alone.
 */
export async function paidResult(base, merchantId, { sent, startedAt, answered, threads }) {
  const final = await call(base, "GET", `/__bench/payouts?merchantId=${encodeURIComponent(merchantId)}&times=1`);
  const paid = final.decided.filter((p) => p.status === "paid");
  const paidAt = paid.map((p) => Date.parse(p.decidedAt));
  const lastPaid = paidAt.length > 0 ? Math.max(...paidAt) : Date.now();
  const seconds = Math.max(0.001, (lastPaid - startedAt) / 1000);
  const latencies = paid.map((p) => Date.parse(p.decidedAt) - Date.parse(p.createdAt)).sort((a, b) => a - b);
  return {
    requests: sent,
    ok: paid.length,
    errors: sent - paid.length,
    rps: sent / seconds,
    okRps: paid.length / seconds,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? 0,
    mean: latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length),
    statuses: { paid: final.paid, failed: final.failed, pending: final.pending },
    socketErrors: answered.socketErrors,
    timeouts: answered.timeouts,
    unanswered: answered.unanswered,
    seconds,
    threads,
    accepted: {
      requests: answered.requests,
      ok: answered.ok,
      errors: answered.errors,
      rps: answered.rps,
      okRps: answered.okRps,
      p50: answered.p50,
      p90: answered.p90,
      p99: answered.p99,
      max: answered.max,
      statuses: answered.statuses,
      seconds: answered.seconds,
    },
  };
}
