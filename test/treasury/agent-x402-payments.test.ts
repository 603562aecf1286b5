import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { v2Request } from "../helpers/paywall-terms";

/*
 * An agent's outbound x402 payment is an authorization signed by the settlement address. One that
 * address cannot cover is refused (503 `treasury_insufficient_funds`, nothing debited): otherwise the
 * agent's wallet is debited for a header no seller can ever settle. This file runs in the treasury
 * project, whose settlement address holds only what its own tests put there.
 */

const UNITS = 10_000n;

describe("outbound x402 payments and the settlement address", () => {
  it("more than the settlement address holds: 503 treasury_insufficient_funds, nothing signed or debited", async () => {
    const treasury = await api("GET", "/console/treasury", { token: await consoleToken() });
    expect(treasury.status, treasury.text).toBe(200);
    const held = BigInt(treasury.body.holdings.settlementBaseUnits);
    // Whole cents, well above what the address holds, within the largest amount the service moves.
    const amount = ((held * 2n) / UNITS + 1n) * UNITS;
    expect(amount).toBeLessThanOrEqual(10n ** 15n);
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: Number(amount / UNITS) });
    const before = BigInt((await api("GET", "/balance", { token: agent.apiKey })).body.balanceBaseUnits);
    expect(before).toBe(amount);
    const res = await api("POST", "/agent/x402/payments", {
      token: agent.apiKey,
      body: v2Request(amount.toString()),
    });
    expect(res.status, res.text).toBe(503);
    expect(res.body.error).toBe("treasury_insufficient_funds");
    expect(BigInt((await api("GET", "/balance", { token: agent.apiKey })).body.balanceBaseUnits)).toBe(before);
    expect((await api("GET", "/agent/x402/payments", { token: agent.apiKey })).body.payments).toHaveLength(0);
  });
});
