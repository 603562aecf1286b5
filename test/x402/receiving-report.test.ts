import { beforeAll, describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { createCharge, createMerchant } from "../helpers/factories";
import { freshPayer, type Payer, payToOf, publicClient, refuseAtRelay, xPaymentHeader } from "../helpers/x402";

/*
 * What x402 payments leave on the receiving addresses, as the console reports it: what the ledger
 * says was settled to each, and what the chain says each holds, side by side. Every test file has
 * its own database, so the totals here are this file's payments alone.
 */
const report = async (query = "") =>
  api("GET", `/console/x402/receiving-addresses${query}`, { token: await consoleToken() });

describe("GET /console/x402/receiving-addresses", () => {
  let merchant: { merchantId: string; apiKey: string };
  let payer: Payer;
  const paid: { chargeId: string; payTo: string; value: bigint }[] = [];
  beforeAll(async () => {
    merchant = await createMerchant({ name: "Holdings Shop" });
    payer = await freshPayer(10_000_000n);
  });

  it("lists each address paid, newest first, with what was settled to it and what it holds on chain; totals over all", async () => {
    const empty = await report();
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({
      asOfBlock: expect.any(Number),
      totals: { addresses: 0, payments: 0, receivedBaseUnits: "0" },
      addresses: [],
    });

    for (const cents of [12, 34]) {
      const charge = await createCharge(merchant.apiKey, cents);
      const path = `/charges/${charge.chargeId}/x402`;
      const payTo = await payToOf(path);
      const value = BigInt(cents) * 10_000n;
      const { header } = await xPaymentHeader(payer.key, value, { to: payTo });
      expect((await api("GET", path, { headers: { "X-PAYMENT": header } })).status).toBe(200);
      paid.push({ chargeId: charge.chargeId, payTo, value });
    }
    // Offered but never paid: not listed.
    await payToOf(`/charges/${(await createCharge(merchant.apiKey, 56)).chargeId}/x402`);

    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body.totals).toEqual({ addresses: 2, payments: 2, receivedBaseUnits: "460000" });
    expect(res.body.asOfBlock).toBeGreaterThanOrEqual(Number(await publicClient().getBlockNumber()) - 1);
    expect(res.body.addresses).toEqual(
      [...paid].reverse().map((p) => ({
        address: p.payTo.toLowerCase(),
        ownerKind: "charge",
        ownerId: p.chargeId,
        merchantId: merchant.merchantId,
        payments: 1,
        receivedBaseUnits: p.value.toString(),
        balanceBaseUnits: p.value.toString(),
        lastPaymentAt: expect.any(String),
      })),
    );
    expect((await report("?limit=1")).body.addresses.map((a: { ownerId: string }) => a.ownerId)).toEqual([
      paid[1]!.chargeId,
    ]);
  });

  it("the console page shows the same addresses, what was settled and what each holds", async () => {
    const page = await api("GET", "/console/ui/receiving", {
      headers: { cookie: `console_session=${await consoleToken()}` },
    });
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="receiving-table"');
    for (const p of paid) expect(page.text).toContain(p.payTo.toLowerCase());
    expect(page.text).toContain(paid[0]!.chargeId);
    // $0.12 + $0.34 settled in all, each address holding what was settled to it.
    expect(/id="receiving-total">([^<]*)</.exec(page.text)?.[1]).toBe("$0.46");
    expect(page.text).toContain("$0.34");
    expect(page.text).toContain("2 payments, 2 addresses");
  });

  it("a chain that cannot be read: the ledger's figures still, the chain's null", async () => {
    // The balances' batch names the addresses (the relay is shared by every file: refuse only ours).
    await refuseAtRelay({ containing: paid[0]!.payTo, method: "eth_call", times: 1, httpStatus: 500 });
    const res = await report();
    expect(res.status).toBe(200);
    expect(res.body.asOfBlock).toBeNull();
    expect(res.body.addresses.length).toBeGreaterThan(0);
    for (const a of res.body.addresses) expect(a.balanceBaseUnits).toBeNull();
  });

  it("console only; a bad limit is 400", async () => {
    expect((await api("GET", "/console/x402/receiving-addresses")).status).toBe(401);
    expect((await api("GET", "/console/x402/receiving-addresses", { token: merchant.apiKey })).status).toBe(403);
    expect((await report("?limit=0")).status).toBe(400);
    expect((await report("?limit=201")).status).toBe(400);
    expect((await report("?other=1")).status).toBe(400);
  });
});
