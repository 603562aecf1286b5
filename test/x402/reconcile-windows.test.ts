import { env } from "cloudflare:workers";
import { type Hex, parseAbiItem, toHex } from "viem";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { authorizationFate } from "../../src/chain/logs";
import { getCharge as readChargeRow } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { remoteFacilitator } from "../../src/x402/facilitator";
import { reconcileOpenPayments } from "../../src/x402/reconcile";
import { payWithX402 } from "../../src/x402/service";
import { api, BASE } from "../helpers/api";
import { createCharge, createMerchant } from "../helpers/factories";
import { envThrough, logSearches, relayTag } from "../helpers/relay";
import { chain, freshPayer, publicClient, refuseAtRelay, xPaymentFor } from "../helpers/x402";

/*
 * Reconciliation's search for the transaction that used an authorization, from the block the
 * service recorded when it found the authorization unused (seen_block), in windows within the
 * provider's range cap; and a node refusing that search: logged as an error, the payment waiting
 * for the next run, which credits it. The remote facilitator is the global set-up's double: its
 * /settle broadcasts the transfer and never answers, so the outcome is unknown and no transaction
 * is known to the service.
 */
const AUTHORIZATION_USED = parseAbiItem("event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)");
const x402Path = (chargeId: string) => `/charges/${chargeId}/x402`;

let merchant: { merchantId: string; apiKey: string };
beforeAll(async () => {
  merchant = await createMerchant({ name: "Windowed Shop" });
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A payment whose settlement broadcast and never answered: `unknown`, the authorization used on chain. */
async function lostSettlement(cents: number) {
  const charge = await createCharge(merchant.apiKey, cents);
  const payer = await freshPayer(10_000_000n);
  const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), payer.key, BigInt(cents) * 10_000n);
  const x = settingsOf(env).x402!;
  const target = { kind: "charge" as const, charge: (await readChargeRow(env.DB, charge.chargeId))! };
  const resource = `${BASE}${x402Path(charge.chargeId)}`;
  const outcome = await payWithX402(env, target, resource, header, remoteFacilitator(x, chain().facilitatorUrl));
  expect(outcome.kind).toBe("pending");
  const nonce = payload.authorization.nonce as Hex;
  let used: { blockNumber: bigint; transactionHash: Hex } | undefined;
  for (let i = 0; i < 100 && !used; i++) {
    const logs = await publicClient().getLogs({
      address: chain().token,
      event: AUTHORIZATION_USED,
      args: { authorizer: payer.address, nonce },
      fromBlock: 0n,
      toBlock: "latest",
    });
    used = logs[0];
    if (!used) await new Promise((r) => setTimeout(r, 100));
  }
  expect(used).toBeDefined();
  const row = await env.DB.prepare(
    "SELECT status, seen_block AS seenBlock, tx_hash AS txHash FROM x402_payments WHERE charge_id = ?",
  )
    .bind(charge.chargeId)
    .first<{ status: string; seenBlock: number | null; txHash: string | null }>();
  return { charge, payer, nonce, row: row!, used: used! };
}

describe("x402 reconciliation's log search", () => {
  it("records the head at which verification found the authorization unused, and finds its use from there in windows", async () => {
    const { payer, nonce, row, used } = await lostSettlement(210);
    expect(row).toMatchObject({ status: "unknown", txHash: null });
    expect(row.seenBlock).not.toBeNull();
    expect(row.seenBlock!).toBeLessThanOrEqual(Number(used.blockNumber));
    await publicClient().request({ method: "anvil_mine" as never, params: [toHex(25)] as never });

    const tag = relayTag();
    const x = settingsOf(envThrough(tag, { RPC_MAX_LOG_RANGE: "10" })).x402!;
    expect(await authorizationFate(x, payer.address, nonce, row.seenBlock)).toEqual({
      kind: "used",
      transaction: used.transactionHash,
    });
    const windows = await logSearches(tag);
    expect(windows[0]!.from).toBe(Math.max(0, row.seenBlock! - 100));
    for (const w of windows) expect(w.to - w.from + 1).toBeLessThanOrEqual(10);
    // It stopped at the window holding the use: none after it, though the head is 25 blocks on.
    const last = windows.at(-1)!;
    expect(last.from).toBeLessThanOrEqual(Number(used.blockNumber));
    expect(last.to).toBeGreaterThanOrEqual(Number(used.blockNumber));
    expect(windows.filter((w) => w.from > Number(used.blockNumber))).toEqual([]);
  });

  it("a refused search is logged as an error and leaves the payment waiting; the next run credits it once", async () => {
    const { charge, nonce, used } = await lostSettlement(230);
    await refuseAtRelay({
      containing: nonce,
      method: "eth_getLogs",
      times: 1,
      message: "block range too large",
      rpcErrorStatus: 400,
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    // (The counts also hold the other test's payment, which its own alarm or this run may credit.)
    const first = await reconcileOpenPayments(env);
    expect(first.waiting).toBeGreaterThanOrEqual(1);
    const refused = errors.mock.calls
      .map((c) => JSON.parse(String(c[0])) as Record<string, unknown>)
      .filter((l) => l.where === "rpc_refused");
    expect(refused).toEqual([
      expect.objectContaining({ level: "error", method: "eth_getLogs", message: "eth_getLogs: block range too large" }),
    ]);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({ status: "pending" });

    const second = await reconcileOpenPayments(env);
    expect(second.credited).toBeGreaterThanOrEqual(1);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({
      status: "paid",
      reference: used.transactionHash,
    });
    expect((await reconcileOpenPayments(env)).credited).toBe(0);
    const credits = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM audit_events WHERE type = 'charge.paid' AND charge_id = ?",
    )
      .bind(charge.chargeId)
      .first<{ n: number }>();
    expect(credits?.n).toBe(1);
  });
});
