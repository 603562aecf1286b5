import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, type Hex, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeXPaymentResponse, wrapFetchWithPayment } from "x402-fetch";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { anvilAccounts } from "../../scripts/lib/chain.mjs";
import { type DevServer, eventReceiver, startDevServer } from "./dev-server";
import { ERC20, sendTokens } from "./erc20";

/** A hosted provider's caps, as docs/operations.md#rpc-providers sets RPC_MAX_LOG_RANGE and RPC_MAX_BATCH for one. */
const MAX_LOG_RANGE = 1000;
const MAX_BATCH = 100;
/** The chain's history before the contracts: three range caps, so no search from block 0 fits in one call. */
const HISTORY = 3 * MAX_LOG_RANGE;

// `npm run dev` as production meets its chain: the service reaches it through DEV_RPC_URL, a proxy that
// refuses what a provider refuses (an eth_getLogs over 1,000 blocks, a batch over 100 calls), on a chain
// whose history is longer than that. Every chain-facing path completes through it, and the proxy refused
// nothing (each step names the refusals it met, so a failure says which search was too wide).
describe("npm run dev behind a provider's limits", () => {
  let dev: DevServer;
  let token: string;
  let merchantKey: string;
  let asset: Hex;
  let dir: string;
  const accounts = anvilAccounts() as { address: Hex; privateKey: Hex }[];

  beforeAll(async () => {
    dev = await startDevServer(
      {
        DEV_CHAIN_HISTORY: String(HISTORY),
        DEV_RPC_MAX_LOG_RANGE: String(MAX_LOG_RANGE),
        DEV_RPC_MAX_BATCH: String(MAX_BATCH),
      },
      { rpcProxy: { maxLogRange: MAX_LOG_RANGE, maxBatch: MAX_BATCH } },
    );
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    merchantKey = (await call("POST", "/merchants", token, { name: "Limited Co" })).body.apiKey;
    const terms = await fetch(`${dev.url}/charges/${await newCharge(1)}/x402`);
    asset = ((await terms.json()) as { accepts: { asset: Hex }[] }).accepts[0]!.asset;
    dir = mkdtempSync(join(tmpdir(), "agent-pay-provider-limits-"));
  });
  afterAll(async () => {
    await dev?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = async (method: string, path: string, key: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${path}`, {
      method,
      // A connection of its own each time: one kept alive can be closed by the dev server as it is reused.
      headers: {
        authorization: `Bearer ${key}`,
        connection: "close",
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, body: text.startsWith("{") ? JSON.parse(text) : null };
  };
  const newCharge = async (amountUsdCents: number) =>
    (await call("POST", "/merchant/charges", merchantKey, { amountUsdCents })).body.chargeId as string;
  const until = async <T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 45_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await read();
      if (done(value) || Date.now() > deadline) return value;
      await new Promise((r) => setTimeout(r, 500));
    }
  };
  const tokensOf = (address: Hex) =>
    createPublicClient({ transport: http(dev.rpcUrl) }).readContract({
      address: asset,
      abi: ERC20,
      functionName: "balanceOf",
      args: [address],
    });
  /** What the proxy refused, for a failure's message: each refusal's kind and span or size. */
  const refusals = async () => JSON.stringify((await dev.proxy!.stats()).refusals);
  const payByX402 = async (privateKey: Hex, cents: number) => {
    const chargeId = await newCharge(cents);
    const response = await wrapFetchWithPayment(
      fetch,
      privateKeyToAccount(privateKey),
      10_000_000n,
    )(`${dev.url}/charges/${chargeId}/x402`);
    return { chargeId, response };
  };

  it("runs on a chain whose history is longer than the range cap, every call of the service through the proxy", async () => {
    const head = await createPublicClient({ transport: http(dev.rpcUrl) }).getBlockNumber();
    expect(head).toBeGreaterThan(BigInt(HISTORY));
    expect((await dev.proxy!.stats()).calls).toBeGreaterThan(0);
  });

  it("settles an x402 payment", async () => {
    const { chargeId, response } = await payByX402(accounts[1]!.privateKey, 150);
    expect(response.status, `${await response.clone().text()} refusals: ${await refusals()}`).toBe(200);
    const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response")!);
    expect(settlement.success).toBe(true);
    const charge = (await (await fetch(`${dev.url}/charges/${chargeId}`)).json()) as Record<string, unknown>;
    expect(charge).toMatchObject({ status: "paid", method: "x402", reference: settlement.transaction });
  });

  it("credits a deposit, and sweeps it to the treasury", async () => {
    const agent = JSON.parse(dev.cli("agent", "create", "--name", "depositor").stdout.trim()) as { apiKey: string };
    const balance = async () =>
      (await call("GET", "/balance", agent.apiKey)).body as { balanceMinor: number; depositAddress: Hex };
    const { depositAddress } = await balance();
    await sendTokens(dev.rpcUrl, accounts[3]!.privateKey, asset, depositAddress, 5_000_000n);
    const credited = await until(balance, (b) => b.balanceMinor > 0);
    expect(credited.balanceMinor, `refusals: ${await refusals()}`).toBe(500);

    // The deposit's sweep: the address's tokens leave for the treasury, by a transfer the service sends.
    const swept = await until(
      async () => tokensOf(depositAddress),
      (left) => left === 0n,
    );
    expect(swept, `refusals: ${await refusals()}`).toBe(0n);
    const sweeps = dev.d1("SELECT status FROM outbound_transfers WHERE purpose = 'sweep'");
    expect(sweeps.stdout).toContain('"status": "confirmed"');
  });

  it("pays a merchant out on chain", async () => {
    const address = privateKeyToAccount(generatePrivateKey()).address;
    // The merchant's balance: an agent's wallet payment.
    const agent = JSON.parse(dev.cli("agent", "create", "--name", "payer", "--credit", "1000").stdout.trim()) as {
      apiKey: string;
    };
    expect((await call("POST", `/charges/${await newCharge(500)}/pay`, agent.apiKey)).status).toBe(200);
    expect((await call("PUT", "/merchant/payout-address", merchantKey, { address })).status).toBe(200);
    const created = await call("POST", "/merchant/payouts", merchantKey, { amountUsdCents: 100 });
    expect(created.status, created.text).toBe(201);
    const payoutId = created.body.payout.payoutId as string;
    const paid = await until(
      async () => (await call("GET", `/merchant/payouts/${payoutId}`, merchantKey)).body.payout,
      (p: { status: string }) => p.status !== "pending",
    );
    expect(paid.status, `refusals: ${await refusals()}`).toBe("paid");
    expect(await tokensOf(address)).toBe(1_000_000n);
  });

  it("refunds an x402 payment on chain", async () => {
    const payer = accounts[7]!;
    const { chargeId, response } = await payByX402(payer.privateKey, 275);
    expect(response.status).toBe(200);
    const before = await tokensOf(payer.address);
    const refunded = await call("POST", `/merchant/charges/${chargeId}/refunds`, merchantKey);
    expect(refunded.status, refunded.text).toBe(201);
    const refund = await until(
      async () => (await call("GET", `/merchant/charges/${chargeId}/refunds`, merchantKey)).body.refunds[0],
      (r: { status: string }) => r.status !== "pending",
    );
    expect(refund, `refusals: ${await refusals()}`).toMatchObject({ method: "x402", status: "succeeded" });
    expect((await tokensOf(payer.address)) - before).toBe(2_750_000n);
  });

  it("anchors a checkpoint, and its evidence file verifies against the chain through the proxy", async () => {
    const agent = JSON.parse(dev.cli("agent", "create", "--name", "evidenced", "--credit", "900").stdout.trim()) as {
      apiKey: string;
    };
    const chargeId = await newCharge(450);
    expect((await call("POST", `/charges/${chargeId}/pay`, agent.apiKey)).status).toBe(200);
    await call("POST", "/console/audit/checkpoints", token);
    const path = `/merchant/charges/${chargeId}/evidence`;
    const evidence = await until(
      () => call("GET", path, merchantKey),
      (res) => res.status !== 409,
    );
    expect(evidence.status, `${evidence.text} refusals: ${await refusals()}`).toBe(200);
    const file = join(dir, "evidence.json");
    writeFileSync(file, evidence.text);
    // The CLI reads the anchor through the same proxy.
    const verified = dev.cliWith(
      { RPC_URL: dev.proxy!.url },
      "evidence",
      "verify",
      file,
      "--keys",
      `${dev.url}/.well-known/jwks.json`,
    );
    expect(verified.status, `${verified.stdout}${verified.stderr} refusals: ${await refusals()}`).toBe(0);
    expect(verified.stdout.trim().split("\n").at(-1)).toBe("evidence ok");

    const audited = dev.cliWith({ RPC_URL: dev.proxy!.url }, "audit", "verify");
    expect(audited.status, `${audited.stdout}${audited.stderr} refusals: ${await refusals()}`).toBe(0);
  });

  it("delivers the payout's event to a receiver while the treasury reads balanced", async () => {
    // The treasury check reads every address's balance through the proxy (batched reads within the batch cap).
    const receiver = await eventReceiver();
    try {
      const me = (await call("GET", "/merchant/me", merchantKey)).body as { merchant: { id: string } };
      const hook = await call("POST", "/settings/webhooks", token, {
        url: receiver.url,
        merchantId: me.merchant.id,
      });
      expect(hook.status).toBe(201);
      // The merchant's payout address and balance of its own, whatever the steps above left.
      const address = privateKeyToAccount(generatePrivateKey()).address;
      expect((await call("PUT", "/merchant/payout-address", merchantKey, { address })).status).toBe(200);
      const agent = JSON.parse(dev.cli("agent", "create", "--name", "hooked", "--credit", "100").stdout.trim()) as {
        apiKey: string;
      };
      expect((await call("POST", `/charges/${await newCharge(60)}/pay`, agent.apiKey)).status).toBe(200);
      const created = await call("POST", "/merchant/payouts", merchantKey, { amountUsdCents: 50 });
      expect(created.status, created.text).toBe(201);
      const event = await until(
        async () => receiver.events.find((e) => e.type === "payout.paid"),
        (e) => e !== undefined,
      );
      expect(event, `refusals: ${await refusals()}`).toBeDefined();
    } finally {
      receiver.close();
    }
    // Every movement above is booked, so the chain's holdings are what the ledger expects.
    const treasury = await call("GET", "/console/treasury", token);
    expect(treasury.status, treasury.text).toBe(200);
    expect(treasury.body.status, `${treasury.text} refusals: ${await refusals()}`).toBe("balanced");
  });

  it("the proxy refused nothing, and no log search it served spanned more than the cap or a batch more than 100 calls", async () => {
    const stats = await dev.proxy!.stats();
    expect(stats.byMethod.eth_getLogs ?? 0).toBeGreaterThan(0);
    expect(stats.refused, JSON.stringify(stats.refusals)).toEqual({ logRange: 0, batch: 0, logResults: 0 });
    expect(stats.largestLogRange).toBeLessThanOrEqual(MAX_LOG_RANGE);
    expect(stats.largestLogRangeAsked, JSON.stringify(stats.refusals)).toBeLessThanOrEqual(MAX_LOG_RANGE);
    expect(stats.largestBatch).toBeLessThanOrEqual(MAX_BATCH);
  });
});
