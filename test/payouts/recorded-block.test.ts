import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setFaultHook } from "../../src/lib/faults";
import { RESEND_AFTER_MS } from "../../src/outbound/advance";
import { outboundNonce } from "../../src/outbound/authorization";
import { advanceDuePayouts } from "../../src/payouts/service";
import { api } from "../helpers/api";
import { injectOnceAwaited } from "../helpers/faults";
import { waitFor } from "../helpers/wait";
import { publicClient, refuseAtRelay } from "../helpers/x402";
import { fundedMerchant, payoutOf, transfersTo, treasury } from "./fixtures";

/*
 * A payout handed to the chain whose outcome was lost (a crash after the broadcast) is settled from
 * the token's logs, searched from the head recorded at its first hand-over (sent_block). A node that
 * refuses that search: logged as an error, the payout waits, and the next pass records it paid.
 */
afterEach(() => {
  setFaultHook(null);
  vi.restoreAllMocks();
});

const cronPass = () => advanceDuePayouts(env, treasury(), Date.now() + RESEND_AFTER_MS + 5_000);

describe("a payout's outcome searched from its recorded block", () => {
  it("records the head at the hand-over; a refused search is logged and waits, the next pass records it paid once", async () => {
    const m = await fundedMerchant(800);
    const fired = injectOnceAwaited("outbound.after_send");
    const res = await api("POST", "/merchant/payouts", {
      token: m.apiKey,
      headers: { "Idempotency-Key": `recorded-${crypto.randomUUID()}` },
      body: { amountUsdCents: 600 },
    });
    expect(res.status, res.text).toBe(201);
    const id = res.body.payout.payoutId as string;
    await fired();
    const [onChain] = await waitFor(
      "the transfer on chain",
      () => transfersTo(m.address),
      (l) => l.length === 1,
    );
    const mined = await publicClient().getTransactionReceipt({ hash: onChain!.transaction });
    const row = await env.DB.prepare("SELECT sent_block AS sentBlock FROM outbound_transfers WHERE owner_id = ?")
      .bind(id)
      .first<{ sentBlock: number | null }>();
    expect(row!.sentBlock).not.toBeNull();
    expect(row!.sentBlock!).toBeLessThanOrEqual(Number(mined.blockNumber));

    await refuseAtRelay({
      containing: outboundNonce("payout", id),
      method: "eth_getLogs",
      times: 1,
      message: "eth_getLogs is limited to a 1000 block range",
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    expect(await cronPass()).toEqual({ confirmed: 0, failed: 0, waiting: 1 });
    const refused = errors.mock.calls
      .map((c) => JSON.parse(String(c[0])) as Record<string, unknown>)
      .filter((l) => l.where === "rpc_refused");
    expect(refused).toEqual([expect.objectContaining({ level: "error", method: "eth_getLogs" })]);
    expect(String(refused[0]!.message)).toContain("limited to a 1000 block range");
    expect((await payoutOf(m.apiKey, id)).status).toBe("pending");

    expect(await cronPass()).toEqual({ confirmed: 1, failed: 0, waiting: 0 });
    expect(await payoutOf(m.apiKey, id)).toMatchObject({ status: "paid", transaction: onChain!.transaction });
    expect(await transfersTo(m.address)).toHaveLength(1);
  });
});
