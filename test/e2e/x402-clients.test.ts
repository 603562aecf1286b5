import { wrapFetchWithPayment as wrapV2, x402Client, x402HTTPClient } from "@x402/fetch";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { createPublicClient, createWalletClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeXPaymentResponse, wrapFetchWithPayment as wrapV1 } from "x402-fetch";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { anvilAccounts } from "../../scripts/lib/chain.mjs";
import { startDevServer, type DevServer } from "./dev-server";

const ERC20 = [
  { type: "function", name: "balanceOf", stateMutability: "view", inputs: [{ name: "a", type: "address" }], outputs: [{ type: "uint256" }] },
  { type: "function", name: "transfer", stateMutability: "nonpayable", inputs: [{ name: "to", type: "address" }, { name: "v", type: "uint256" }], outputs: [{ type: "bool" }] },
] as const;

// The official x402 clients, unchanged, paying the local service on its local chain.
describe("official x402 clients against npm run dev", () => {
  let dev: DevServer;
  let token: string;
  let merchantKey: string;
  const accounts = anvilAccounts() as { address: Hex; privateKey: Hex }[];

  beforeAll(async () => {
    dev = await startDevServer();
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

  const chargeOf = async (chargeId: string) => (await (await fetch(`${dev.url}/charges/${chargeId}`)).json()) as { status: string; method: string; reference: string };

  it("x402-fetch 1.x pays a charge with a v1 X-PAYMENT", async () => {
    const chargeId = await newCharge(150);
    const pay = wrapV1(fetch, privateKeyToAccount(accounts[1]!.privateKey), 10_000_000n);
    const response = await pay(`${dev.url}/charges/${chargeId}/x402`);
    expect(response.status).toBe(200);
    const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response")!);
    expect(settlement.success).toBe(true);
    expect(await chargeOf(chargeId)).toMatchObject({ status: "paid", method: "x402", reference: settlement.transaction });
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
    expect(await chargeOf(chargeId)).toMatchObject({ status: "paid", method: "x402", reference: settlement.transaction });

    const link = await fetch(`${dev.url}/merchant/checkout`, {
      method: "POST",
      headers: { authorization: `Bearer ${merchantKey}`, "content-type": "application/json" },
      body: JSON.stringify({ amountUsdCents: 99, description: "one report" }),
    });
    const { checkoutToken } = (await link.json()) as { checkoutToken: string };
    const paidLink = await pay(`${dev.url}/checkout/${checkoutToken}/x402`);
    expect(paidLink.status).toBe(200);
    const view = (await (await fetch(`${dev.url}/checkout/${checkoutToken}`)).json()) as { paymentsCount: number; totalPaidMinor: number };
    expect(view).toMatchObject({ paymentsCount: 1, totalPaidMinor: 99 });
  });

  it("settles many payments at once, each answered with its own settlement", async () => {
    const chargeIds = await Promise.all(Array.from({ length: 12 }, (_, i) => newCharge(20 + i)));
    const pay = wrapV1(fetch, privateKeyToAccount(accounts[4]!.privateKey), 10_000_000n);
    const responses = await Promise.all(chargeIds.map((chargeId) => pay(`${dev.url}/charges/${chargeId}/x402`)));
    expect(responses.map((r) => r.status)).toEqual(chargeIds.map(() => 200));
    const settlements = responses.map((r) => decodeXPaymentResponse(r.headers.get("x-payment-response")!));
    expect(settlements.every((s) => s.success)).toBe(true);
    expect(new Set(settlements.map((s) => s.transaction)).size).toBe(12);
  });

  it("tops up an agent wallet from its deposit address", async () => {
    const created = dev.cli("agent", "create", "--name", "depositor");
    const agent = JSON.parse(created.stdout.trim()) as { apiKey: string };
    const balance = async () => (await (await fetch(`${dev.url}/balance`, { headers: { authorization: `Bearer ${agent.apiKey}` } })).json()) as { balanceMinor: number; depositAddress: Hex };
    const { depositAddress } = await balance();
    const terms = await fetch(`${dev.url}/charges/${await newCharge(1)}/x402`);
    const asset = ((await terms.json()) as { accepts: { asset: Hex }[] }).accepts[0]!.asset;
    const wallet = createWalletClient({ account: privateKeyToAccount(accounts[3]!.privateKey), transport: http(dev.rpcUrl) });
    const hash = await wallet.writeContract({ chain: null, address: asset, abi: ERC20, functionName: "transfer", args: [depositAddress, 5_000_000n] });
    await createPublicClient({ transport: http(dev.rpcUrl) }).waitForTransactionReceipt({ hash });
    const deadline = Date.now() + 30_000;
    let credited = 0;
    while (Date.now() < deadline && credited === 0) {
      credited = (await balance()).balanceMinor;
      if (credited === 0) await new Promise((r) => setTimeout(r, 500));
    }
    expect(credited).toBe(500);
  });
});
