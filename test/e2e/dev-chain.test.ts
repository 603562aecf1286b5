import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { createPublicClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeXPaymentResponse, wrapFetchWithPayment } from "x402-fetch";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { anvilAccounts } from "../../scripts/lib/chain.mjs";
import { BEHIND_A_PROVIDER, type DevServer, expectNothingRefused, keptAnvil, startDevServer } from "./dev-server";
import { ERC20, sendTokens } from "./erc20";

interface Recorded {
  deposit: Hex;
  settlement: Hex;
  anchor: Hex;
}

// `npm run dev` keeps its chain consistent with its database: the chain outlives a kill of npm run
// dev's process group (anvil runs in a session of its own), comes back from its saved state after a
// kill of everything, and a chain that lacks what the database recorded is refused.
describe("npm run dev's chain across restarts", () => {
  let dev: DevServer;
  const accounts = anvilAccounts() as { address: Hex; privateKey: Hex }[];
  const payer = accounts[1]!;
  const depositor = accounts[3]!;
  let merchantKey: string;
  let agentKey: string;
  let asset: Hex;

  beforeAll(async () => {
    dev = await startDevServer(BEHIND_A_PROVIDER.vars, BEHIND_A_PROVIDER.options);
  });
  afterAll(async () => {
    // The newest start's: it ends the anvil kept for the state directory whichever start left it.
    await dev?.stop();
  });

  const call = async (method: string, route: string, token: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const chain = () => createPublicClient({ transport: http(dev.rpcUrl) });
  /**
   * The transactions the service recorded as done in its database (read as an operator with wrangler
   * would): the deposit, the settled x402 payment, the first confirmed anchor.
   */
  const recorded = (): Partial<Recorded> => {
    const run = dev.d1(
      "SELECT tx_hash FROM deposits; SELECT tx_hash FROM x402_payments WHERE status = 'settled'; " +
        "SELECT tx_hash FROM audit_checkpoints WHERE anchor_status = 'confirmed' ORDER BY seq LIMIT 1",
    );
    expect(run.status, run.stderr + run.stdout).toBe(0);
    const [deposit, settlement, anchor] = (
      JSON.parse(run.stdout.slice(run.stdout.indexOf("["))) as { results: { tx_hash: Hex }[] }[]
    ).map((answer) => answer.results[0]?.tx_hash);
    return { deposit, settlement, anchor };
  };
  let done: Recorded;
  /** Every balance the three movements touched, in the service and on chain. */
  const balances = async () => {
    const tokens = (address: Hex) =>
      chain().readContract({ address: asset, abi: ERC20, functionName: "balanceOf", args: [address] });
    return {
      agent: (await call("GET", "/balance", agentKey)).json.balanceMinor,
      merchant: ((await call("GET", "/merchant/me", merchantKey)).json.merchant as { balanceMinor: number })
        .balanceMinor,
      payer: await tokens(payer.address),
      depositor: await tokens(depositor.address),
    };
  };
  let before: Awaited<ReturnType<typeof balances>>;
  /** The last transaction before a kill: the chain's saved state must reach its block. */
  let lastPaid: Hex;

  /** Pays a new charge of `cents` by x402 (x402-fetch 1.x): the settlement's transaction. */
  const payByX402 = async (cents: number) => {
    const charge = await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: cents });
    const pay = wrapFetchWithPayment(fetch, privateKeyToAccount(payer.privateKey), 10_000_000n);
    const response = await pay(`${dev.url}/charges/${charge.json.chargeId}/x402`);
    expect(response.status).toBe(200);
    const settlement = decodeXPaymentResponse(response.headers.get("x-payment-response")!);
    expect(settlement.success).toBe(true);
    return settlement.transaction as Hex;
  };
  /** Sends `units` of the token from the depositor to the agent's deposit address: the transaction, mined. */
  const deposit = async (units: bigint) => {
    const { depositAddress } = (await call("GET", "/balance", agentKey)).json as { depositAddress: Hex };
    return sendTokens(dev.rpcUrl, depositor.privateKey, asset, depositAddress, units);
  };
  const receiptsOf = (hashes: Hex[]) =>
    Promise.all(
      hashes.map((hash) =>
        chain()
          .getTransactionReceipt({ hash })
          .then((r) => r.status),
      ),
    );

  it("records a deposit, an x402 settlement and an audit anchor, each on chain", async () => {
    const token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    merchantKey = (await call("POST", "/merchants", token, { name: "Kept Chain Co" })).json.apiKey as string;
    agentKey = (JSON.parse(dev.cli("agent", "create", "--name", "kept").stdout.trim()) as { apiKey: string }).apiKey;
    const terms = await fetch(
      `${dev.url}/charges/${(await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: 1 })).json.chargeId}/x402`,
    );
    asset = ((await terms.json()) as { accepts: { asset: Hex }[] }).accepts[0]!.asset;

    const sent = await deposit(5_000_000n);
    const settled = await payByX402(150);
    expect((await call("POST", "/console/audit/checkpoints", token)).status).toBeLessThan(300);

    // The watcher credits the deposit and the checkpoint is anchored by the cron (every 2 s here).
    let seen = recorded();
    for (let i = 0; i < 150 && !(seen.deposit && seen.settlement && seen.anchor); i++) {
      await new Promise((r) => setTimeout(r, 200));
      seen = recorded();
    }
    expect(seen).toEqual({ deposit: sent, settlement: settled, anchor: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    done = seen as Recorded;
    expect(await receiptsOf([done.deposit, done.settlement, done.anchor])).toEqual(["success", "success", "success"]);
    before = await balances();
    expect(before).toMatchObject({ agent: 500, merchant: 150 });
  });

  it("a kill of npm run dev's process group leaves the chain running; the next start takes it over, all of it there", async () => {
    await dev.kill();
    expect(keptAnvil(dev.stateDir)).not.toBeNull();
    expect(await chain().getChainId()).toBe(84532);

    // No cron on this start: nothing is sent to the chain behind the test's back before the kill below.
    dev = await dev.restart({ DEV_CRON_SECONDS: "3600" });
    expect(dev.log()).toContain(`[dev] using the chain already running at ${dev.rpcUrl}`);
    expect(await receiptsOf([done.deposit, done.settlement, done.anchor])).toEqual(["success", "success", "success"]);
    expect(await balances()).toEqual(before);

    const next = await payByX402(70);
    expect(await receiptsOf([next])).toEqual(["success"]);
    lastPaid = next;
    before = { ...(await balances()) };
    expect(before.merchant).toBe(150 + 70);
  });

  it("a kill of everything, anvil too, after the chain's state was saved: the next start loads it, all of it there", async () => {
    // The chain saves its state within a few seconds of a block with transactions: wait for the one
    // that holds the last payment, then kill npm run dev's group and anvil at once.
    const last = (await chain().getTransactionReceipt({ hash: lastPaid })).blockNumber;
    const saved = path.join(dev.stateDir, "chain", "anvil-state.json");
    const savedHead = () => {
      try {
        return BigInt(JSON.parse(readFileSync(saved, "utf8")).best_block_number);
      } catch {
        return -1n;
      }
    };
    for (let i = 0; i < 150 && savedHead() < last; i++) await new Promise((r) => setTimeout(r, 200));
    expect(savedHead()).toBeGreaterThanOrEqual(last);
    const anvil = keptAnvil(dev.stateDir)!;
    await dev.kill();
    process.kill(anvil, "SIGKILL");
    while (keptAnvil(dev.stateDir) !== null) await new Promise((r) => setTimeout(r, 100));

    dev = await dev.restart({ DEV_CRON_SECONDS: "2" });
    expect(dev.log()).toContain("[dev] the chain comes back from its saved state");
    expect(await receiptsOf([done.deposit, done.settlement, done.anchor])).toEqual(["success", "success", "success"]);
    expect(await balances()).toEqual(before);
    const next = await payByX402(30);
    expect(await receiptsOf([next])).toEqual(["success"]);
    expect((await balances()).merchant).toBe(before.merchant + 30);
    // The deposit watcher goes on too: a new deposit is credited.
    await deposit(2_000_000n);
    let agent = (await balances()).agent;
    for (let i = 0; i < 150 && agent === before.agent; i++) {
      await new Promise((r) => setTimeout(r, 200));
      agent = (await balances()).agent;
    }
    expect(agent).toBe(500 + 200);
  });

  it("refuses a chain that lacks what the database recorded, and says how to start over", async () => {
    const anvil = keptAnvil(dev.stateDir)!;
    await dev.kill();
    process.kill(anvil, "SIGKILL");
    while (keptAnvil(dev.stateDir) !== null) await new Promise((r) => setTimeout(r, 100));
    // The chain's state gone: the next start runs a new chain under the old database.
    rmSync(path.join(dev.stateDir, "chain"), { recursive: true, force: true });

    const refused = await dev.restart().then(
      () => "started",
      (error: Error) => error.message,
    );
    expect(refused).toMatch(/^npm run dev exited early with 1:/);
    expect(refused).toContain(`[dev] the local chain at ${dev.rpcUrl} lacks `);
    expect(refused).toContain(`[dev]   audit anchor checkpoint `);
    expect(refused).toContain(`: ${done.anchor}`);
    expect(refused).toContain(`: ${done.deposit}`);
    expect(refused).toContain(
      `[dev] To start over with an empty database and a new chain: stop npm run dev, delete ${dev.stateDir} (the local database and the chain's state), and run npm run dev again.`,
    );
    // It stopped the new chain it started for the check.
    expect(keptAnvil(dev.stateDir)).toBeNull();
  });

  it("went through a provider's proxy that refused nothing", async () => {
    await expectNothingRefused(dev);
  });
});
