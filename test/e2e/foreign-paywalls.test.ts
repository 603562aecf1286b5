import { decodePaymentRequiredHeader, decodePaymentSignatureHeader } from "@x402/core/http";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment as wrapV2, x402Client, x402HTTPClient } from "@x402/fetch";
import { createPublicClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeXPaymentResponse, wrapFetchWithPayment as wrapV1 } from "x402-fetch";
import { facilitatorTerms } from "../../examples/paywall/facilitator";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { anvilAccounts } from "../../scripts/lib/chain.mjs";
import { EIP3009_ABI } from "../../src/chain/client";
import { authorizationFor, paymentHeader, signTransferAuthorization } from "../../src/x402/outbound/authorization";
import { choosePayableEntry } from "../../src/x402/outbound/choice";
import { OutboundPaymentRequest } from "../../src/x402/outbound/request";
import { type DevServer, startDevServer } from "./dev-server";
import { ERC20 } from "./erc20";
import {
  FOREIGN_NETWORKS,
  type ForeignChain,
  type ForeignMode,
  type ForeignPaywall,
  foreignPaywallV1,
  foreignPaywallV2,
} from "./foreign-paywalls";

interface Sent {
  from: Hex;
  nonce: Hex;
}

/** The authorization in a payment header a client sent: `X-PAYMENT` (v1) or `PAYMENT-SIGNATURE` (v2). */
function authorizationIn(headers: Headers): Sent | null {
  const v2 = headers.get("payment-signature");
  const v1 = headers.get("x-payment");
  if (v2) return (decodePaymentSignatureHeader(v2).payload as { authorization: Sent }).authorization;
  if (v1) return (JSON.parse(atob(v1)) as { payload: { authorization: Sent } }).payload.authorization;
  return null;
}

// The fixture of paywalls the project did not write (foreign-paywalls.ts), proven with the official
// clients: a paid call moves exactly the price to the paywall's payTo through the official
// facilitator, and the two ways a seller can keep a payment unsettled do what they say.
describe("paywalls of the official x402 middlewares, settled by the official facilitators on the local chain", () => {
  let dev: DevServer;
  let chain: ForeignChain;
  const accounts = anvilAccounts() as { address: Hex; privateKey: Hex }[];
  const opened: ForeignPaywall[] = [];

  beforeAll(async () => {
    dev = await startDevServer();
    const token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    // The local token and its domain, as the service names them to its merchants. A pooled connection
    // the dev server closed meanwhile fails at once: the call is made again (a second merchant harms nothing).
    const newMerchant = () =>
      fetch(`${dev.url}/merchants`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", connection: "close" },
        body: JSON.stringify({ name: "terms only" }),
      });
    const res = await newMerchant().catch(newMerchant);
    expect(res.status).toBe(201);
    const terms = await facilitatorTerms(dev.url, ((await res.json()) as { apiKey: string }).apiKey);
    chain = { rpcUrl: dev.rpcUrl, asset: terms.asset, extra: terms.extra };
    // The migrated databases are made once per run, and other runs share the machine.
  }, 300_000);
  afterAll(async () => {
    await Promise.all(opened.map((p) => p.close()));
    await dev?.stop();
  });

  const reader = () => createPublicClient({ transport: http(dev.rpcUrl) });
  const tokensOf = (address: Hex) =>
    reader().readContract({ address: chain.asset, abi: ERC20, functionName: "balanceOf", args: [address] });
  const used = (sent: Sent) =>
    reader().readContract({
      address: chain.asset,
      abi: EIP3009_ABI,
      functionName: "authorizationState",
      args: [sent.from, sent.nonce],
    });
  const open = async (version: 1 | 2, mode: ForeignMode, maxTimeoutSeconds?: number) => {
    const paywall = await (version === 1 ? foreignPaywallV1 : foreignPaywallV2)(chain, { mode, maxTimeoutSeconds });
    opened.push(paywall);
    return paywall;
  };
  /** The official client of `version` paying from `payer`; what it sent and what it got. */
  const pay = async (version: 1 | 2, payer: { privateKey: Hex }, url: string) => {
    const sent: Sent[] = [];
    const recording: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      const authorization = authorizationIn(request.headers);
      if (authorization) sent.push(authorization);
      return fetch(request);
    };
    const account = privateKeyToAccount(payer.privateKey);
    if (version === 1) {
      const res = await wrapV1(recording, account, 100_000n)(url);
      const header = res.headers.get("x-payment-response");
      return { res, sent, settlement: header ? decodeXPaymentResponse(header) : null };
    }
    const client = registerExactEvmScheme(new x402Client(), { signer: account });
    client.setSpendControls({
      allowedAssets: [{ network: FOREIGN_NETWORKS.v2, asset: chain.asset, maxAmountPerPayment: "100000" }],
    });
    const res = await wrapV2(recording, client)(url);
    const settlement =
      res.status === 200 ? new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n)) : null;
    return { res, sent, settlement };
  };

  for (const version of [1, 2] as const) {
    const payer = () => accounts[version]!;

    it(`v${version} normal: each price lands on the payTo exactly, settled on chain`, async () => {
      const paywall = await open(version, "normal");
      const unpaid = await fetch(`${paywall.url}/cheap`);
      expect(unpaid.status).toBe(402);
      const before = await tokensOf(payer().address);
      let received = 0n;
      for (const path of ["/cheap", "/dear"] as const) {
        const { res, sent, settlement } = await pay(version, payer(), `${paywall.url}${path}`);
        expect(res.status, await res.clone().text()).toBe(200);
        expect(await res.json()).toEqual({ paid: path, paidWith: `x402 v${version}` });
        expect(settlement).toMatchObject({ success: true, network: FOREIGN_NETWORKS[`v${version}`] });
        expect(settlement!.transaction).toMatch(/^0x[0-9a-f]{64}$/);
        expect(sent).toHaveLength(1);
        expect(await used(sent[0]!)).toBe(true);
        received += paywall.prices[path];
        expect(await tokensOf(paywall.payTo)).toBe(received);
      }
      expect(received).toBe(51_000n);
      expect(before - (await tokensOf(payer().address))).toBe(received);
      expect(paywall.held()).toBe(0);
    });

    it(`v${version}: the service's outbound header (src/x402/outbound), signed from a funded account, pays it`, async () => {
      const paywall = await open(version, "normal", 120);
      const url = `${paywall.url}/dear`;
      const unpaid = await fetch(url);
      expect(unpaid.status).toBe(402);
      // What an agent hands over: the v1 body, or the decoded v2 PAYMENT-REQUIRED.
      const required = unpaid.headers.get("payment-required");
      const paymentRequired = version === 2 ? decodePaymentRequiredHeader(required!) : await unpaid.json();
      const request = OutboundPaymentRequest.parse({ resource: url, paymentRequired });
      const choice = choosePayableEntry(
        {
          network: "base-sepolia",
          chainId: 84532,
          asset: chain.asset,
          assetName: chain.extra.name,
          assetVersion: chain.extra.version,
        },
        request.paymentRequired,
      );
      if (choice.kind !== "payable") throw new Error(JSON.stringify(choice));
      expect(choice.terms).toMatchObject({ version, payTo: paywall.payTo, value: 50_000n, maxTimeoutSeconds: 120 });
      const signer = privateKeyToAccount(accounts[5 + version]!.privateKey);
      const nonce = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex;
      const authorization = authorizationFor(choice.terms, signer.address, Math.floor(Date.now() / 1000), nonce);
      const signature = await signTransferAuthorization(signer, choice.terms, 84532, authorization);
      const header = paymentHeader(request.paymentRequired, choice.entry, authorization, signature);
      expect(header.name).toBe(version === 1 ? "X-PAYMENT" : "PAYMENT-SIGNATURE");

      const paid = await fetch(url, { headers: { [header.name]: header.value } });
      expect(paid.status, await paid.clone().text()).toBe(200);
      expect(await paid.json()).toEqual({ paid: "/dear", paidWith: `x402 v${version}` });
      expect(await used({ from: signer.address, nonce })).toBe(true);
      expect(await tokensOf(paywall.payTo)).toBe(50_000n);
    });

    it(`v${version} never-settles: 200, the payTo unpaid and the authorization unused`, async () => {
      const paywall = await open(version, "never-settles");
      const before = await tokensOf(payer().address);
      const { res, sent } = await pay(version, payer(), `${paywall.url}/cheap`);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(sent).toHaveLength(1);
      expect(paywall.held()).toBe(1);
      expect(await tokensOf(paywall.payTo)).toBe(0n);
      expect(await used(sent[0]!)).toBe(false);
      expect(await tokensOf(payer().address)).toBe(before);
      await expect(paywall.settleHeld()).rejects.toThrow(/settles nothing later/);
    });

    it(`v${version} settles-late: 200 at once, the money moves only when settleHeld() is called`, async () => {
      const paywall = await open(version, "settles-late");
      const before = await tokensOf(payer().address);
      const { res, sent } = await pay(version, payer(), `${paywall.url}/dear`);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(sent).toHaveLength(1);
      expect(paywall.held()).toBe(1);
      expect(await tokensOf(paywall.payTo)).toBe(0n);
      expect(await used(sent[0]!)).toBe(false);

      const outcomes = await paywall.settleHeld();
      expect(outcomes).toEqual([expect.objectContaining({ success: true })]);
      expect(outcomes[0]!.transaction).toMatch(/^0x[0-9a-f]{64}$/);
      expect(paywall.held()).toBe(0);
      expect(await used(sent[0]!)).toBe(true);
      expect(await tokensOf(paywall.payTo)).toBe(50_000n);
      expect(before - (await tokensOf(payer().address))).toBe(50_000n);
    });
  }
});
