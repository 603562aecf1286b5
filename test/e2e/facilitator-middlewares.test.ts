import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment as wrapV2, x402Client, x402HTTPClient } from "@x402/fetch";
import type { Hono } from "hono";
import { createPublicClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeXPaymentResponse, wrapFetchWithPayment as wrapV1 } from "x402-fetch";
import { PAID_PATH, paywallV1, paywallV2 } from "../../examples/paywall/app";
import { baseUnitsOf, type FacilitatorTerms, facilitatorTerms, networkNames } from "../../examples/paywall/facilitator";
import { type Served, serve } from "../../examples/paywall/serve";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { anvilAccounts } from "../../scripts/lib/chain.mjs";
import {
  BEHIND_A_PROVIDER,
  type DevServer,
  devProxyReloaded,
  expectNothingRefused,
  startDevServer,
} from "./dev-server";
import { ERC20 } from "./erc20";

interface Charge {
  chargeId: string;
  status: string;
  method: string;
  reference: string;
  resource: string;
  description: string | null;
  amountMinor: number | null;
  amountBaseUnits: string;
}

/** `$0.001`, the example's price, in the token's base units. */
const PRICE_UNITS = "1000";

// Merchants' own APIs behind the official x402 middlewares (examples/paywall), `npm run dev` as their
// facilitator, paid by the official clients; and the facilitator's settle route under a replayed
// payload and a thousand sub-cent payments.
describe("the official x402 middlewares with npm run dev as their facilitator", () => {
  let dev: DevServer;
  let token: string;
  const accounts = anvilAccounts() as { address: Hex; privateKey: Hex }[];
  const served: Served[] = [];

  beforeAll(async () => {
    dev = await startDevServer(BEHIND_A_PROVIDER.vars, BEHIND_A_PROVIDER.options);
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
  });
  afterAll(async () => {
    await Promise.all(served.map((s) => s.close()));
    await dev?.stop();
  });

  const newMerchant = async (name: string) => {
    const res = await fetch(`${dev.url}/merchants`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", connection: "close" },
      body: JSON.stringify({ name }),
    });
    expect(res.status).toBe(201);
    const key = ((await res.json()) as { apiKey: string }).apiKey;
    return { key, terms: await facilitatorTerms(dev.url, key) };
  };
  const asMerchant = async <T>(key: string, path: string) => {
    const res = await fetch(`${dev.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status, path).toBe(200);
    return (await res.json()) as T;
  };
  const balanceOf = async (key: string) =>
    (await asMerchant<{ merchant: { balanceBaseUnits: string; balanceMinor: number } }>(key, "/merchant/me")).merchant;
  const chargesOf = async (key: string) => (await asMerchant<{ charges: Charge[] }>(key, "/merchant/charges")).charges;
  /**
   * One paid call's trace: the merchant's one charge, paid by x402 for the paid URL at exactly its
   * price; the balance up by exactly that (its whole cents unchanged); the payer's tokens down by it.
   */
  const expectOnePaidCall = async (
    key: string,
    call: {
      transaction: string;
      url: string;
      before: { merchant: { balanceBaseUnits: string; balanceMinor: number }; payer: bigint };
      terms: { asset: Hex };
      payer: { address: Hex };
    },
  ) => {
    const charges = await chargesOf(key);
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({
      status: "paid",
      method: "x402",
      reference: call.transaction,
      resource: call.url,
      description: "One market report",
      amountBaseUnits: PRICE_UNITS,
      amountMinor: null,
    });
    const after = await balanceOf(key);
    expect(BigInt(after.balanceBaseUnits) - BigInt(call.before.merchant.balanceBaseUnits)).toBe(1000n);
    expect(after.balanceMinor).toBe(call.before.merchant.balanceMinor);
    expect(call.before.payer - (await tokensOf(call.terms.asset, call.payer.address))).toBe(1000n);
    return charges;
  };
  const tokensOf = (asset: Hex, address: Hex) =>
    createPublicClient({ transport: http(dev.rpcUrl) }).readContract({
      address: asset,
      abi: ERC20,
      functionName: "balanceOf",
      args: [address],
    });
  const start = async (app: Hono) => {
    const server = await serve(app.fetch);
    served.push(server);
    return server;
  };
  /** A v2 client of the official packages paying from `privateKey`, allowed to pay the service's token. */
  const v2Client = (privateKey: Hex, terms: FacilitatorTerms) => {
    const client = registerExactEvmScheme(new x402Client(), { signer: privateKeyToAccount(privateKey) });
    client.setSpendControls({
      allowedAssets: [{ network: networkNames(terms.network).v2, asset: terms.asset, maxAmountPerPayment: "1000000" }],
    });
    return client;
  };
  /** The v2 requirements a middleware builds for `$0.001` on these terms. */
  const requirementsOf = (terms: FacilitatorTerms): PaymentRequirements => ({
    scheme: "exact",
    network: networkNames(terms.network).v2,
    amount: PRICE_UNITS,
    asset: terms.asset,
    payTo: terms.payTo,
    maxTimeoutSeconds: 300,
    extra: { ...terms.extra },
  });
  /** A payment payload the official v2 client signs for `requirements`, as a middleware would receive it. */
  const signed = (client: x402Client, requirements: PaymentRequirements, url: string) =>
    client.createPaymentPayload({
      x402Version: 2,
      resource: { url, description: "One market report", mimeType: "application/json" },
      accepts: [requirements],
    });
  const facilitatorCall = async (
    key: string,
    action: "verify" | "settle",
    paymentPayload: PaymentPayload,
    paymentRequirements: PaymentRequirements,
  ) => {
    // One signed authorization settles once however often it is sent: a request the dev proxy dropped
    // while the Worker reloaded is sent again (the merchant's balance below shows nothing paid twice).
    for (let attempt = 1; ; attempt++) {
      const res = await fetch(`${dev.url}/x402/facilitator/${action}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ x402Version: 2, paymentPayload, paymentRequirements }),
      });
      const text = await res.text();
      if (devProxyReloaded(res.status, text) && attempt < 3) {
        const said = dev
          .log()
          .split("\n")
          .filter((line) => /⎔|reload|changed/i.test(line));
        console.warn(`the dev proxy answered a reload; sent again. The server said: ${said.slice(-5).join(" | ")}`);
        continue;
      }
      try {
        return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
      } catch {
        throw new Error(`${action} answered ${res.status}, not JSON: ${text.slice(0, 200)}`);
      }
    }
  };

  it("answers a merchant the terms its middleware needs", async () => {
    const { terms } = await newMerchant("terms shop");
    expect(terms).toEqual({
      facilitatorUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/\S+$/),
      payTo: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      network: expect.any(String),
      asset: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      extra: { name: expect.any(String), version: expect.any(String) },
    });
    expect(networkNames(terms.network)).toEqual({ v1: "base-sepolia", v2: "eip155:84532" });
    const other = await newMerchant("another terms shop");
    expect(other.terms.payTo).not.toBe(terms.payTo);
  });

  it("@x402/hono (v2) paid by @x402/fetch: a paid x402 charge of exactly 1000 base units for the paid URL", async () => {
    const { key, terms } = await newMerchant("v2 paywall");
    const paywall = await start(paywallV2(terms, key));
    const url = `${paywall.url}${PAID_PATH}`;
    const unpaid = await fetch(url);
    expect(unpaid.status).toBe(402);
    const payer = accounts[1]!;
    const before = { merchant: await balanceOf(key), payer: await tokensOf(terms.asset, payer.address) };
    expect(before.merchant).toMatchObject({ balanceBaseUnits: "0", balanceMinor: 0 });

    const client = v2Client(payer.privateKey, terms);
    const res = await wrapV2(fetch, client)(url);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({ paidWith: "x402 v2" });
    const settlement = new x402HTTPClient(client).getPaymentSettleResponse((name) => res.headers.get(name));
    expect(settlement).toMatchObject({ success: true, network: "eip155:84532" });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);

    const charges = await expectOnePaidCall(key, { transaction: settlement.transaction, url, before, terms, payer });
    const receipt = await fetch(`${dev.url}/charges/${charges[0]!.chargeId}/receipt`);
    expect(receipt.status).toBe(200);
  });

  it("x402-hono (v1) paid by x402-fetch: a paid x402 charge of exactly 1000 base units for the paid URL", async () => {
    const { key, terms } = await newMerchant("v1 paywall");
    const paywall = await start(paywallV1(terms, key));
    const url = `${paywall.url}${PAID_PATH}`;
    const payer = accounts[2]!;
    const before = { merchant: await balanceOf(key), payer: await tokensOf(terms.asset, payer.address) };
    expect(before.merchant).toMatchObject({ balanceBaseUnits: "0", balanceMinor: 0 });

    const res = await wrapV1(fetch, privateKeyToAccount(payer.privateKey), 100_000n)(url);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({ paidWith: "x402 v1" });
    const settlement = decodeXPaymentResponse(res.headers.get("x-payment-response")!);
    expect(settlement).toMatchObject({ success: true, network: "base-sepolia" });

    await expectOnePaidCall(key, { transaction: settlement.transaction, url, before, terms, payer });
  });

  it("a middleware with another merchant's payTo and this merchant's key: refused in verify and settle, the client gets 402, nothing is credited", async () => {
    const own = await newMerchant("own key");
    const other = await newMerchant("other payTo");
    const misdirected = { ...own.terms, payTo: other.terms.payTo };
    const payer = accounts[3]!;
    const tokensBefore = await tokensOf(own.terms.asset, payer.address);

    const v2 = await start(paywallV2(misdirected, own.key));
    const paidV2 = await wrapV2(fetch, v2Client(payer.privateKey, own.terms))(`${v2.url}${PAID_PATH}`);
    expect(paidV2.status).toBe(402);
    const v1 = await start(paywallV1(misdirected, own.key));
    const paidV1 = await wrapV1(fetch, privateKeyToAccount(payer.privateKey), 100_000n)(`${v1.url}${PAID_PATH}`);
    expect(paidV1.status).toBe(402);
    expect(await paidV1.json()).toMatchObject({ error: "invalid_exact_evm_payload_recipient_mismatch" });

    // The facilitator's own answers to that payment, asked directly with the merchant's key.
    const requirements = requirementsOf(misdirected);
    const payload = await signed(v2Client(payer.privateKey, own.terms), requirements, `${v2.url}${PAID_PATH}`);
    expect(await facilitatorCall(own.key, "verify", payload, requirements)).toMatchObject({
      status: 200,
      body: { isValid: false, invalidReason: "invalid_exact_evm_recipient_mismatch" },
    });
    expect(await facilitatorCall(own.key, "settle", payload, requirements)).toMatchObject({
      status: 200,
      body: { success: false, errorReason: "invalid_exact_evm_recipient_mismatch" },
    });

    for (const merchant of [own, other]) {
      expect(await balanceOf(merchant.key)).toMatchObject({ balanceBaseUnits: "0", balanceMinor: 0 });
      expect(await chargesOf(merchant.key)).toEqual([]);
    }
    expect(await tokensOf(own.terms.asset, payer.address)).toBe(tokensBefore);
  });

  it("one payment payload settled five times at once, in each of eight rounds: one charge, one credit, one transaction", async () => {
    const { key, terms } = await newMerchant("replayed settle");
    const payer = accounts[4]!;
    const tokensBefore = await tokensOf(terms.asset, payer.address);
    const requirements = requirementsOf(terms);
    const client = v2Client(payer.privateKey, terms);
    const rounds: { payload: PaymentPayload; transaction: unknown; resource: string }[] = [];
    // A race is won or lost by timing: eight payloads, each sent five times at once.
    for (let round = 0; round < 8; round++) {
      const resource = `https://api.example/report?round=${round}`;
      const payload = await signed(client, requirements, resource);
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => facilitatorCall(key, "settle", payload, requirements)),
      );
      for (const answer of answers)
        expect(answer, `round ${round}: ${JSON.stringify(answers)}`).toMatchObject({
          status: 200,
          body: { success: true },
        });
      const transactions = new Set(answers.map((a) => a.body.transaction));
      expect(transactions.size, JSON.stringify(answers)).toBe(1);
      const [transaction] = [...transactions];
      expect(transaction).toMatch(/^0x[0-9a-f]{64}$/);
      rounds.push({ payload, transaction, resource });
    }
    // The first asked again later (its answer lost): the same outcome, nothing more.
    expect(await facilitatorCall(key, "settle", rounds[0]!.payload, requirements)).toMatchObject({
      status: 200,
      body: { success: true, transaction: rounds[0]!.transaction },
    });

    const paid = BigInt(PRICE_UNITS) * BigInt(rounds.length);
    expect((await balanceOf(key)).balanceBaseUnits).toBe(String(paid));
    const charges = await chargesOf(key);
    expect(charges).toHaveLength(rounds.length);
    for (const { transaction, resource } of rounds) {
      expect(charges.filter((c) => c.reference === transaction)).toEqual([
        expect.objectContaining({ status: "paid", amountBaseUnits: PRICE_UNITS, resource }),
      ]);
    }
    expect(tokensBefore - (await tokensOf(terms.asset, payer.address))).toBe(paid);
  });

  it("a thousand $0.001 payments settled through the facilitator leave the merchant exactly $1.00, the treasury balanced", async () => {
    const { key, terms } = await newMerchant("a thousand calls");
    const requirements = requirementsOf(terms);
    // Nine payers (anvil accounts 1-9), each signing its share with the official client.
    const clients = accounts.slice(1, 10).map((a) => v2Client(a.privateKey, terms));
    const payloads = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        signed(clients[i % clients.length]!, requirements, `https://api.example/report?call=${i}`),
      ),
    );
    expect(baseUnitsOf("$0.001")).toBe(PRICE_UNITS);

    // Twenty settles in flight at a time.
    const outcomes: Record<string, unknown>[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < payloads.length) {
          const payload = payloads[next++]!;
          const answer = await facilitatorCall(key, "settle", payload, requirements);
          outcomes.push({ status: answer.status, ...answer.body });
        }
      }),
    );
    const failed = outcomes.filter((o) => o.status !== 200 || o.success !== true);
    expect(failed.slice(0, 3), `${failed.length} of 1000 not settled`).toEqual([]);

    // Soft: the treasury is checked too when the balance is wrong, each a finding of its own.
    expect.soft(await balanceOf(key)).toMatchObject({ balanceBaseUnits: "1000000", balanceMinor: 100 });
    const treasury = await fetch(`${dev.url}/console/treasury`, { headers: { authorization: `Bearer ${token}` } });
    const check = (await treasury.json()) as { status: string };
    expect(treasury.status, JSON.stringify(check)).toBe(200);
    expect(check.status, JSON.stringify(check)).toBe("balanced");
  }, 600_000);

  it("went through a provider's proxy that refused nothing", async () => {
    await expectNothingRefused(dev);
  });
});
