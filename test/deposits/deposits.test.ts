import { env } from "cloudflare:workers";
import { type Hex, toHex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import type { Env } from "../../src/config/env";
import { watchDeposits } from "../../src/deposits/watcher";
import { api, consoleToken } from "../helpers/api";
import { cronTick as oneMinute } from "../helpers/cron";
import { ownDepositIndexes } from "../helpers/deposits";
import { balanceOf, createAgent } from "../helpers/factories";
import { freshSender, sendTokens } from "../helpers/tokens";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { publicClient } from "../helpers/x402";

/*
 * Stablecoin deposits to agent wallets, on the real local chain, with
 * DEPOSIT_CONFIRMATIONS = 2. Senders are fresh keys funded by this file
 * directly on the local chain (anvil_setBalance for gas, anvil_setStorageAt on
 * the token's balance mapping), so no other file's transactions share their
 * nonces or balances. Deposit addresses are derived per database, and each
 * test file has its own: the first few indexes are taken by throwaway agents
 * so this file's agents never share an address with another file's agent.
 */
const mine = (blocks = 1) =>
  publicClient().request({ method: "anvil_mine" as never, params: [toHex(blocks)] as never });

async function depositAddressOf(agentKey: string): Promise<Hex> {
  const res = await api("GET", "/balance", { token: agentKey });
  expect(res.status).toBe(200);
  expect(res.body.depositAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
  return res.body.depositAddress;
}

/** Runs the watcher until it has read up to the confirmed head (a young chain needs one pass; a long one, several). */
async function catchUp() {
  for (let pass = 0; pass < 50; pass++) {
    const head = Number(await publicClient().getBlockNumber());
    const result = await watchDeposits(env);
    if (result.toBlock === null || result.toBlock >= head - 1) return;
  }
  throw new Error("the deposit watcher did not catch up with the chain");
}

/** One run of the Worker's cron handler, as the `* * * * *` trigger runs it. */
async function cronTick() {
  await oneMinute(env as Env);
}

beforeAll(async () => {
  await ownDepositIndexes();
  for (let i = 0; i < 3; i++) await createAgent({ name: `placeholder ${i}` });
});

describe("deposits to agent wallets", () => {
  it("agents get distinct deposit addresses, derived from the deposit key at their stored index", async () => {
    const agents = await Promise.all(Array.from({ length: 6 }, (_, i) => createAgent({ name: `depositor ${i}` })));
    const addresses = await Promise.all(agents.map((a) => depositAddressOf(a.apiKey)));
    expect(new Set(addresses.map((a) => a.toLowerCase())).size).toBe(agents.length);
    for (const [i, agent] of agents.entries()) {
      expect((agent as { depositAddress?: string }).depositAddress?.toLowerCase()).toBe(addresses[i]!.toLowerCase());
      const row = await env.DB.prepare(
        "SELECT deposit_index AS depositIndex, deposit_address AS address FROM agents WHERE id = ?",
      )
        .bind(agent.agentId)
        .first<{ depositIndex: number; address: string }>();
      expect(row!.address.toLowerCase()).toBe(addresses[i]!.toLowerCase());
      expect(mnemonicToAccount(env.DEPOSIT_MNEMONIC!, { addressIndex: row!.depositIndex }).address.toLowerCase()).toBe(
        addresses[i]!.toLowerCase(),
      );
      // Asking again gives the same address.
      expect((await depositAddressOf(agent.apiKey)).toLowerCase()).toBe(addresses[i]!.toLowerCase());
    }
  });

  it("a transfer to the deposit address is credited once after 2 confirmations, audited, and deposit.confirmed is delivered", async () => {
    const hook = `ok-deposits-${crypto.randomUUID().slice(0, 8)}`;
    await registerEndpoint(hook, { events: ["deposit.confirmed"] });
    const agent = await createAgent({ name: "topped up" });
    const address = await depositAddressOf(agent.apiKey);
    const sender = await freshSender(100_000_000n);
    await catchUp(); // read everything before this transfer first, so the next passes are about it

    const value = 1_234_567n; // 123.4567 cents: 123 credited
    const sent = await sendTokens(sender, address, value);

    // One confirmation so far (the transfer's own block). A pass may only read up to head - 1.
    const early = await watchDeposits(env);
    const headAfterEarly = await publicClient().getBlockNumber();
    if (early.toBlock !== null) expect(early.toBlock).toBeLessThanOrEqual(Number(headAfterEarly) - 1);
    const earlyCovered = early.toBlock !== null && early.toBlock >= Number(sent.blockNumber);
    expect(await balanceOf(agent.apiKey)).toBe(earlyCovered ? 123 : 0);

    await mine(1);
    const confirmed = await watchDeposits(env);
    expect(confirmed.toBlock).not.toBeNull();
    expect(confirmed.toBlock!).toBeGreaterThanOrEqual(Number(sent.blockNumber));
    expect(await balanceOf(agent.apiKey)).toBe(123);

    // Re-running, and re-reading blocks already seen, credits nothing twice.
    const again = await watchDeposits(env);
    expect(again.credited).toBe(0);
    await env.DB.prepare("UPDATE chain_cursors SET block_number = ?")
      .bind(Number(sent.blockNumber) - 3)
      .run();
    const reread = await watchDeposits(env);
    expect(reread.fromBlock).toBeLessThanOrEqual(Number(sent.blockNumber));
    expect(reread.credited).toBe(0);
    expect(await balanceOf(agent.apiKey)).toBe(123);

    const rows = await env.DB.prepare(
      "SELECT agent_id AS agentId, address, sender, value, amount_minor AS amountMinor, status, log_index AS logIndex FROM deposits WHERE tx_hash = ?",
    )
      .bind(sent.hash.toLowerCase())
      .all();
    expect(rows.results).toEqual([
      {
        agentId: agent.agentId,
        address: address.toLowerCase(),
        sender: sender.account.address.toLowerCase(),
        value: value.toString(),
        amountMinor: 123,
        status: "credited",
        logIndex: sent.logIndex,
      },
    ]);
    const audit = await env.DB.prepare(
      "SELECT type, agent_id AS agentId, amount_minor AS amountMinor, reference FROM audit_events WHERE agent_id = ? AND type = 'deposit.confirmed'",
    )
      .bind(agent.agentId)
      .all();
    expect(audit.results).toEqual([
      {
        type: "deposit.confirmed",
        agentId: agent.agentId,
        amountMinor: 123,
        reference: `${sent.hash.toLowerCase()}:${sent.logIndex}`,
      },
    ]);
    const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
    expect(verify.body.ok).toBe(true);

    // The next cron tick fans the event out; the endpoint without merchantId receives it.
    await cronTick();
    const got = await waitForReceived(hook, (list) =>
      list.some((d) => JSON.parse(d.body).data?.agentId === agent.agentId),
    );
    const deliveries = got.filter((d) => JSON.parse(d.body).data?.agentId === agent.agentId);
    expect(deliveries).toHaveLength(1);
    const event = JSON.parse(deliveries[0]!.body);
    expect(event.type).toBe("deposit.confirmed");
    expect(deliveries[0]!.headers["x-service-event"]).toBe("deposit.confirmed");
    expect(event.data).toMatchObject({ agentId: agent.agentId, amount: 123, network: "base-sepolia" });
    expect(String(event.data.address).toLowerCase()).toBe(address.toLowerCase());
    expect(await balanceOf(agent.apiKey)).toBe(123);
  });

  it("each transfer is credited on its own, in whole cents rounded down", async () => {
    const agent = await createAgent({ name: "two deposits" });
    const address = await depositAddressOf(agent.apiKey);
    const sender = await freshSender(100_000_000n);
    await sendTokens(sender, address, 2_000_000n); // 200 cents
    await sendTokens(sender, address, 19_999n); // 1.9999 cents: 1
    await mine(2);
    await catchUp();
    expect(await balanceOf(agent.apiKey)).toBe(201);
    await watchDeposits(env);
    expect(await balanceOf(agent.apiKey)).toBe(201);
    const rows = await env.DB.prepare(
      "SELECT amount_minor AS amountMinor FROM deposits WHERE agent_id = ? ORDER BY amount_minor",
    )
      .bind(agent.agentId)
      .all();
    expect(rows.results).toEqual([{ amountMinor: 1 }, { amountMinor: 200 }]);
  });

  it("a transfer from a KYT-flagged sender is recorded as blocked and not credited", async () => {
    const agent = await createAgent({ name: "flagged deposit" });
    const address = await depositAddressOf(agent.apiKey);
    const sender = await freshSender(100_000_000n);
    const listed = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: sender.account.address, reason: "test: flagged sender" },
    });
    expect(listed.status).toBe(201);

    const sent = await sendTokens(sender, address, 5_000_000n);
    await mine(2);
    await catchUp();
    await watchDeposits(env);
    expect(await balanceOf(agent.apiKey)).toBe(0);
    const rows = await env.DB.prepare("SELECT status, amount_minor AS amountMinor FROM deposits WHERE tx_hash = ?")
      .bind(sent.hash.toLowerCase())
      .all();
    expect(rows.results).toEqual([{ status: "blocked", amountMinor: 500 }]);
    const audit = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM audit_events WHERE agent_id = ? AND type = 'deposit.confirmed'",
    )
      .bind(agent.agentId)
      .first<{ n: number }>();
    expect(audit?.n).toBe(0);
    const events = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'deposit.confirmed' AND data LIKE ?",
    )
      .bind(`%${agent.agentId}%`)
      .first<{ n: number }>();
    expect(events?.n).toBe(0);
  });
});
