import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { appendPaymentIdentifierToExtensions, generatePaymentId } from "@x402/extensions/payment-identifier";
import { wrapFetchWithPayment as wrapV2, x402Client, x402HTTPClient } from "@x402/fetch";
import { createPublicClient, type Hex, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeXPaymentResponse, wrapFetchWithPayment as wrapV1 } from "x402-fetch";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { anvilAccounts } from "../../scripts/lib/chain.mjs";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/chain/client";
import { BEHIND_A_PROVIDER, type DevServer, eventReceiver, expectNothingRefused, startDevServer } from "./dev-server";
import { ERC20, sendTokens } from "./erc20";

// The official x402 clients, unchanged, paying the local service on its local chain.
describe("official x402 clients against npm run dev", () => {
  let dev: DevServer;
  let token: string;
  let merchantKey: string;
  const accounts = anvilAccounts() as { address: Hex; privateKey: Hex }[];

  beforeAll(async () => {
    dev = await startDevServer(BEHIND_A_PROVIDER.vars, BEHIND_A_PROVIDER.options);
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    const res = await fetch(`${dev.url}/merchants`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "x402 shop" }),
    });
    merchantKey = ((await res.json()) as { apiKey: string }).apiKey;
  });
  afterAll(async () => {
    await dev?.stop();
  });

  const newCharge = async (amountUsdCents: number) => {
    const res = await fetch(`${dev.url}/merchant/charges`, {
      method: "POST",
      headers: { authorization: `Bearer ${merchantKey}`, "content-type": "application/json" },
      body: JSON.stringify({ amountUsdCents }),
    });
    return ((await res.json()) as { chargeId: string }).chargeId;
  };

  const chargeOf = async (chargeId: string) =>
    (await (await fetch(`${dev.url}/charges/${chargeId}`)).json()) as {
      status: string;
      method: string;
      reference: string;
    };

  it("x402-fetch 1.x pays a charge with a v1 X-PAYMENT", async () => {
    const chargeId = await newCharge(150);
    const pay = wrapV1(fetch, privateKeyToAccount(accounts[1]!.privateKey), 10_000_000n);
    const response = await pay(`${dev.url}/charges/${chargeId}/x402`);
    expect(response.status).toBe(200);
    const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response")!);
    expect(settlement.success).toBe(true);
    expect(await chargeOf(chargeId)).toMatchObject({
      status: "paid",
      method: "x402",
      reference: settlement.transaction,
    });
  });

  it("@x402/fetch 2.x pays a charge and a checkout link with PAYMENT-SIGNATURE", async () => {
    const chargeId = await newCharge(275);
    const terms = await fetch(`${dev.url}/charges/${chargeId}/x402`);
    const asset = ((await terms.json()) as { accepts: { asset: string }[] }).accepts[0]!.asset;
    const client = registerExactEvmScheme(new x402Client(), { signer: privateKeyToAccount(accounts[2]!.privateKey) });
    client.setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset, maxAmountPerPayment: "100000000" }] });
    const pay = wrapV2(fetch, client);
    const response = await pay(`${dev.url}/charges/${chargeId}/x402`);
    expect(response.status).toBe(200);
    const settlement = new x402HTTPClient(client).getPaymentSettleResponse((name) => response.headers.get(name));
    expect(settlement.success).toBe(true);
    expect(await chargeOf(chargeId)).toMatchObject({
      status: "paid",
      method: "x402",
      reference: settlement.transaction,
    });

    const link = await fetch(`${dev.url}/merchant/checkout`, {
      method: "POST",
      headers: { authorization: `Bearer ${merchantKey}`, "content-type": "application/json" },
      body: JSON.stringify({ amountUsdCents: 99, description: "one report" }),
    });
    const { checkoutToken } = (await link.json()) as { checkoutToken: string };
    const paidLink = await pay(`${dev.url}/checkout/${checkoutToken}/x402`);
    expect(paidLink.status).toBe(200);
    const view = (await (await fetch(`${dev.url}/checkout/${checkoutToken}`)).json()) as {
      paymentsCount: number;
      totalPaidMinor: number;
    };
    expect(view).toMatchObject({ paymentsCount: 1, totalPaidMinor: 99 });
  });

  /** A v2 client of the official packages paying from `privateKey`, allowed to pay the local token. */
  const v2Client = (privateKey: Hex, asset: string) => {
    const client = registerExactEvmScheme(new x402Client(), { signer: privateKeyToAccount(privateKey) });
    client.setSpendControls({ allowedAssets: [{ network: "eip155:84532", asset, maxAmountPerPayment: "100000000" }] });
    return client;
  };
  const tokenBalanceOf = (asset: string, address: Hex) =>
    createPublicClient({ transport: http(dev.rpcUrl) }).readContract({
      address: asset as Hex,
      abi: ERC20,
      functionName: "balanceOf",
      args: [address],
    });

  it("the payment-identifier extension (@x402/extensions with @x402/fetch, as its own example): a repeat of one purchase pays once", async () => {
    const payer = accounts[8]!;
    const link = await fetch(`${dev.url}/merchant/checkout`, {
      method: "POST",
      headers: { authorization: `Bearer ${merchantKey}`, "content-type": "application/json" },
      body: JSON.stringify({ amountUsdCents: 40, description: "identified report" }),
    });
    const { checkoutToken } = (await link.json()) as { checkoutToken: string };
    const url = `${dev.url}/checkout/${checkoutToken}/x402`;
    const terms = await fetch(url);
    const asset = ((await terms.json()) as { accepts: { asset: string }[] }).accepts[0]!.asset;
    const declared = JSON.parse(Buffer.from(terms.headers.get("payment-required")!, "base64").toString("utf8"));
    expect(declared.extensions["payment-identifier"].info).toEqual({ required: false });

    const client = v2Client(payer.privateKey, asset);
    const paymentId = generatePaymentId();
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      if (paymentRequired.extensions) appendPaymentIdentifierToExtensions(paymentRequired.extensions, paymentId);
    });
    const before = await tokenBalanceOf(asset, payer.address);
    const pay = wrapV2(fetch, client);
    const first = await pay(url);
    expect(first.status).toBe(200);
    const firstBody = (await first.json()) as { chargeId: string; settlement: { settlementId: string } };
    // The same logical request again: the client signs a new authorization with the same id; nothing more is paid.
    const second = await pay(url);
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual(firstBody);
    expect(before - (await tokenBalanceOf(asset, payer.address))).toBe(400_000n);
    const view = (await (await fetch(`${dev.url}/checkout/${checkoutToken}`)).json()) as { paymentsCount: number };
    expect(view.paymentsCount).toBe(1);
    const settlement = await fetch(`${dev.url}/x402/settlements/${firstBody.settlement.settlementId}`);
    expect(await settlement.json()).toMatchObject({ status: "settled", chargeId: firstBody.chargeId });
  });

  it("hand-built EIP-3009 authorizations: 10-minute and 23-hour windows settle, a 25-hour one is refused with a protocol reason", async () => {
    const signer = privateKeyToAccount(accounts[9]!.privateKey);
    const now = BigInt(Math.floor(Date.now() / 1000));
    const payWithWindow = async (seconds: bigint) => {
      const chargeId = await newCharge(30);
      const url = `${dev.url}/charges/${chargeId}/x402`;
      const { accepts } = (await (await fetch(url)).json()) as {
        accepts: { payTo: Hex; asset: Hex; maxAmountRequired: string; extra: { name: string; version: string } }[];
      };
      const terms = accepts[0]!;
      const authorization = {
        from: signer.address,
        to: terms.payTo,
        value: BigInt(terms.maxAmountRequired),
        validAfter: now - 60n,
        validBefore: now + seconds,
        nonce: `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex,
      };
      const signature = await signer.signTypedData({
        domain: {
          name: terms.extra.name,
          version: terms.extra.version,
          chainId: 84532,
          verifyingContract: terms.asset,
        },
        types: TRANSFER_WITH_AUTHORIZATION_TYPES,
        primaryType: "TransferWithAuthorization",
        message: authorization,
      });
      const payload = {
        x402Version: 1,
        scheme: "exact",
        network: "base-sepolia",
        payload: {
          signature,
          authorization: Object.fromEntries(Object.entries(authorization).map(([k, v]) => [k, String(v)])),
        },
      };
      const res = await fetch(url, {
        headers: { "X-PAYMENT": Buffer.from(JSON.stringify(payload)).toString("base64") },
      });
      return { chargeId, res, body: (await res.json()) as Record<string, any> };
    };
    for (const seconds of [600n, 23n * 3600n]) {
      const { chargeId, res, body } = await payWithWindow(seconds);
      expect(res.status, `${seconds} s: ${JSON.stringify(body)}`).toBe(200);
      expect(await chargeOf(chargeId)).toMatchObject({ status: "paid", reference: body.settlement.transaction });
    }
    const refused = await payWithWindow(25n * 3600n);
    expect(refused.res.status).toBe(402);
    expect(refused.body).toMatchObject({
      error: "Pago inválido",
      invalidReason: "invalid_exact_evm_payload_authorization_valid_before",
    });
    expect((await chargeOf(refused.chargeId)).status).toBe("pending");
  });

  it("settles many payments at once, each answered with its own settlement", async () => {
    const chargeIds = await Promise.all(Array.from({ length: 12 }, (_, i) => newCharge(20 + i)));
    const pay = wrapV1(fetch, privateKeyToAccount(accounts[4]!.privateKey), 10_000_000n);
    const responses = await Promise.all(chargeIds.map((chargeId) => pay(`${dev.url}/charges/${chargeId}/x402`)));
    expect(responses.map((r) => r.status)).toEqual(chargeIds.map(() => 200));
    const settlements = responses.map((r) => decodeXPaymentResponse(r.headers.get("x-payment-response")!));
    expect(settlements.every((s) => s.success && /^0x[0-9a-f]{64}$/.test(s.transaction))).toBe(true);
    // npm run dev batches settlements: several may share a transaction, each is its own settlement.
    const bodies = await Promise.all(
      responses.map((r) => r.json() as Promise<{ settlement: { settlementId: string } }>),
    );
    expect(new Set(bodies.map((b) => b.settlement.settlementId)).size).toBe(12);
    for (const [i, chargeId] of chargeIds.entries()) {
      const charge = (await (await fetch(`${dev.url}/charges/${chargeId}`)).json()) as Record<string, unknown>;
      expect(charge).toMatchObject({ status: "paid", method: "x402", reference: settlements[i]!.transaction });
    }
  });

  /** A second merchant, for payments made for one merchant's charge and sent to another's. */
  const otherMerchantKey = async () => {
    const res = await fetch(`${dev.url}/merchants`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "another x402 shop" }),
    });
    return ((await res.json()) as { apiKey: string }).apiKey;
  };
  const chargeOf2 = async (key: string, amountUsdCents: number) => {
    const res = await fetch(`${dev.url}/merchant/charges`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ amountUsdCents }),
    });
    return ((await res.json()) as { chargeId: string }).chargeId;
  };
  const balanceOfMerchant = async (key: string) =>
    (
      (await (await fetch(`${dev.url}/merchant/me`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        merchant: { balanceMinor: number };
      }
    ).merchant.balanceMinor;

  /**
   * The X-PAYMENT header x402-fetch 1.x signs for `url`, captured instead of sent: a proxy, a
   * logging middleware or a compromised client component holds exactly this.
   */
  async function captureV1Header(url: string, privateKey: Hex): Promise<string> {
    let captured: string | null = null;
    const capturing: typeof fetch = async (input, init) => {
      const header = new Headers(init?.headers).get("X-PAYMENT");
      if (!header) return fetch(input, init);
      captured = header;
      return new Response("{}", { status: 200, headers: { "content-type": "application/json" } });
    };
    const response = await wrapV1(capturing, privateKeyToAccount(privateKey), 10_000_000n)(url);
    expect(response.status).toBe(200);
    expect(captured).toBeTruthy();
    return captured!;
  }
  const sendHeader = (url: string, header: string, method = "GET") =>
    fetch(url, { method, headers: { "X-PAYMENT": header } });

  it("a header x402-fetch 1.x signed for one merchant's charge is refused (402) on another's of the same amount, and still pays its own", async () => {
    const m1 = await otherMerchantKey();
    const c1 = await newCharge(170);
    const c2 = await chargeOf2(m1, 170);
    const header = await captureV1Header(`${dev.url}/charges/${c1}/x402`, accounts[5]!.privateKey);

    const elsewhere = await sendHeader(`${dev.url}/charges/${c2}/x402`, header);
    expect(elsewhere.status).toBe(402);
    const refused = (await elsewhere.json()) as { error: string; invalidReason: string };
    expect(refused).toMatchObject({
      error: "Pago inválido",
      invalidReason: "invalid_exact_evm_payload_recipient_mismatch",
    });
    expect(JSON.stringify(refused)).not.toContain(c1);
    expect(await chargeOf(c2)).toMatchObject({ status: "pending" });
    expect(await balanceOfMerchant(m1)).toBe(0);

    const own = await sendHeader(`${dev.url}/charges/${c1}/x402`, header);
    expect(own.status).toBe(200);
    expect(await chargeOf(c1)).toMatchObject({ status: "paid", method: "x402" });
    expect(await chargeOf(c2)).toMatchObject({ status: "pending" });
    expect(await balanceOfMerchant(m1)).toBe(0);
  });

  it("a header captured for one merchant's checkout link is refused on another's of the same amount, and pays its own", async () => {
    const m1 = await otherMerchantKey();
    const link = async (key: string) => {
      const res = await fetch(`${dev.url}/merchant/checkout`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ amountUsdCents: 50, description: "a 50-cent report" }),
      });
      return ((await res.json()) as { checkoutToken: string }).checkoutToken;
    };
    const [own, other] = [await link(merchantKey), await link(m1)];
    const header = await captureV1Header(`${dev.url}/checkout/${own}/x402`, accounts[5]!.privateKey);
    expect((await sendHeader(`${dev.url}/checkout/${other}/x402`, header, "POST")).status).toBe(402);
    expect(await balanceOfMerchant(m1)).toBe(0);
    const view = async (token: string) =>
      (await (await fetch(`${dev.url}/checkout/${token}`)).json()) as { paymentsCount: number };
    expect((await view(other)).paymentsCount).toBe(0);
    expect((await sendHeader(`${dev.url}/checkout/${own}/x402`, header, "POST")).status).toBe(200);
    expect((await view(own)).paymentsCount).toBe(1);
  });

  it("one captured header sent to two charges at once, in either order: 200 for its own, a plain 402 for the other", async () => {
    const m1 = await otherMerchantKey();
    for (const ownFirst of [true, false]) {
      const c1 = await newCharge(170);
      const c2 = await chargeOf2(m1, 170);
      const header = await captureV1Header(`${dev.url}/charges/${c1}/x402`, accounts[6]!.privateKey);
      const toOwn = () => sendHeader(`${dev.url}/charges/${c1}/x402`, header);
      const toOther = () => sendHeader(`${dev.url}/charges/${c2}/x402`, header);
      const [a, b] = await Promise.all(ownFirst ? [toOwn(), toOther()] : [toOther(), toOwn()]);
      const [ownAnswer, otherAnswer] = ownFirst ? [a, b] : [b, a];
      expect(ownAnswer.status).toBe(200);
      expect(otherAnswer.status).toBe(402);
      const otherBody = await otherAnswer.text();
      expect(otherBody).not.toContain(c1);
      expect(JSON.parse(otherBody)).toMatchObject({ error: "Pago inválido" });
      expect(await chargeOf(c1)).toMatchObject({ status: "paid" });
      expect(await chargeOf(c2)).toMatchObject({ status: "pending" });
    }
    expect(await balanceOfMerchant(m1)).toBe(0);
  });

  it("tops up an agent wallet from its deposit address", async () => {
    const created = dev.cli("agent", "create", "--name", "depositor");
    const agent = JSON.parse(created.stdout.trim()) as { apiKey: string };
    const balance = async () =>
      (await (await fetch(`${dev.url}/balance`, { headers: { authorization: `Bearer ${agent.apiKey}` } })).json()) as {
        balanceMinor: number;
        depositAddress: Hex;
      };
    const { depositAddress } = await balance();
    const terms = await fetch(`${dev.url}/charges/${await newCharge(1)}/x402`);
    const asset = ((await terms.json()) as { accepts: { asset: Hex }[] }).accepts[0]!.asset;
    await sendTokens(dev.rpcUrl, accounts[3]!.privateKey, asset, depositAddress, 5_000_000n);
    const deadline = Date.now() + 30_000;
    let credited = 0;
    while (Date.now() < deadline && credited === 0) {
      credited = (await balance()).balanceMinor;
      if (credited === 0) await new Promise((r) => setTimeout(r, 500));
    }
    expect(credited).toBe(500);
  });

  // docs/walkthrough.md, "Money out: payouts and refunds", against the same running service.
  it("pays the merchant out on chain (payout.paid at a receiver), and refunds a wallet charge and an x402 charge", async () => {
    const chain = createPublicClient({ transport: http(dev.rpcUrl) });
    const asset = (
      (await (await fetch(`${dev.url}/charges/${await newCharge(1)}/x402`)).json()) as { accepts: { asset: Hex }[] }
    ).accepts[0]!.asset;
    const tokensOf = (address: Hex) =>
      chain.readContract({ address: asset, abi: ERC20, functionName: "balanceOf", args: [address] });
    const asMerchant = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      fetch(`${dev.url}${path}`, {
        method,
        // No body, no Content-Type: every field of the body takes its default (the walkthrough's curl).
        headers: {
          authorization: `Bearer ${merchantKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const until = async <T>(read: () => Promise<T>, done: (value: T) => boolean) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const value = await read();
        if (done(value) || Date.now() > deadline) return value;
        await new Promise((r) => setTimeout(r, 300));
      }
    };

    // A receiver for the merchant's events.
    const receiver = await eventReceiver();
    const { events } = receiver;
    try {
      const me = (await (await asMerchant("GET", "/merchant/me")).json()) as { merchant: { id: string } };
      const hook = await fetch(`${dev.url}/settings/webhooks`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ url: receiver.url, merchantId: me.merchant.id }),
      });
      expect(hook.status).toBe(201);

      // Pay out 1 dollar to a fresh address: the tokens arrive on chain, once.
      const address = privateKeyToAccount(generatePrivateKey()).address;
      expect((await asMerchant("PUT", "/merchant/payout-address", { address })).status).toBe(200);
      const key = { "Idempotency-Key": "first-payout" };
      const created = await asMerchant("POST", "/merchant/payouts", { amountUsdCents: 100 }, key);
      expect(created.status).toBe(201);
      const createdText = await created.text();
      const { payout } = JSON.parse(createdText) as { payout: { payoutId: string; status: string } };
      expect(payout.status).toBe("pending");
      const paid = await until(
        async () =>
          (
            (await (await asMerchant("GET", `/merchant/payouts/${payout.payoutId}`)).json()) as {
              payout: { status: string; transaction: Hex };
            }
          ).payout,
        (p) => p.status !== "pending",
      );
      expect(paid.status).toBe("paid");
      expect(await tokensOf(address)).toBe(1_000_000n);
      const replay = await asMerchant("POST", "/merchant/payouts", { amountUsdCents: 100 }, key);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(await replay.text()).toBe(createdText);
      expect(await tokensOf(address)).toBe(1_000_000n);
      const paidEvent = await until(
        async () => events.find((e) => e.type === "payout.paid"),
        (e) => e !== undefined,
      );
      expect(paidEvent?.data).toMatchObject({
        payoutId: payout.payoutId,
        amountMinor: 100,
        transaction: paid.transaction,
      });

      // Refund a wallet payment in two parts; a third is refused.
      const agent = JSON.parse(dev.cli("agent", "create", "--name", "refunded", "--credit", "1000").stdout.trim()) as {
        apiKey: string;
      };
      const walletCharge = await newCharge(400);
      const pay = await fetch(`${dev.url}/charges/${walletCharge}/pay`, {
        method: "POST",
        headers: { authorization: `Bearer ${agent.apiKey}` },
      });
      expect(pay.status).toBe(200);
      const part = await asMerchant("POST", `/merchant/charges/${walletCharge}/refunds`, { amountUsdCents: 150 });
      expect(part.status).toBe(201);
      expect(await part.json()).toMatchObject({
        refund: { amountMinor: 150, method: "ledger", status: "succeeded" },
        charge: { status: "paid", refundedMinor: 150 },
      });
      const rest = await asMerchant("POST", `/merchant/charges/${walletCharge}/refunds`);
      expect(await rest.json()).toMatchObject({ refund: { amountMinor: 250 }, charge: { refundedMinor: 400 } });
      const more = await asMerchant("POST", `/merchant/charges/${walletCharge}/refunds`);
      expect(more.status).toBe(409);
      expect(await more.json()).toEqual({ error: "refund_exceeds_remaining" });
      const agentBalance = await fetch(`${dev.url}/balance`, { headers: { authorization: `Bearer ${agent.apiKey}` } });
      expect(((await agentBalance.json()) as { balanceMinor: number }).balanceMinor).toBe(1000);

      // Refund an x402 payment: the payer's tokens come back on chain.
      const payer = privateKeyToAccount(accounts[7]!.privateKey);
      const x402Charge = await newCharge(275);
      const paidOnChain = await wrapV1(fetch, payer, 10_000_000n)(`${dev.url}/charges/${x402Charge}/x402`);
      expect(paidOnChain.status).toBe(200);
      const before = await tokensOf(payer.address);
      const refunded = await asMerchant("POST", `/merchant/charges/${x402Charge}/refunds`);
      expect(refunded.status).toBe(201);
      const refund = await until(
        async () =>
          (
            (await (await asMerchant("GET", `/merchant/charges/${x402Charge}/refunds`)).json()) as {
              refunds: { status: string; method: string; transaction: Hex | null }[];
            }
          ).refunds[0]!,
        (r) => r.status !== "pending",
      );
      expect(refund).toMatchObject({ method: "x402", status: "succeeded" });
      expect(refund.transaction).toMatch(/^0x[0-9a-f]{64}$/);
      expect((await tokensOf(payer.address)) - before).toBe(2_750_000n);
      await until(
        async () => events.filter((e) => e.type === "charge.refunded").length,
        (n) => n >= 3,
      );
      expect(events.filter((e) => e.type === "charge.refunded").map((e) => e.data.method)).toEqual(
        expect.arrayContaining(["ledger", "ledger", "x402"]),
      );
    } finally {
      receiver.close();
    }
  });

  it("went through a provider's proxy that refused nothing", async () => {
    await expectNothingRefused(dev);
  });
});
