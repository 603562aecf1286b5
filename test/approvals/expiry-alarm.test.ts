import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { createAgent, createCharge, createMerchant } from "../helpers/factories";

describe("approval expiry by alarm", () => {
  it("the agent's wallet object expires a held payment's approval at its expiry, idempotently", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000, policy: { approvalThresholdUsdCents: 10 } });
    const charge = await createCharge(merchant.apiKey, 500);
    const hold = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey });
    expect(hold.status).toBe(402);
    const stub = env.WALLET.getByName(agent.agentId);
    // Not due yet: the alarm leaves it pending.
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const pending = await env.DB.prepare("SELECT status FROM approvals WHERE id = ?")
      .bind(hold.body.approvalId)
      .first<{ status: string }>();
    expect(pending?.status).toBe("pending");
    // Due: the alarm (re-armed for it) expires it; firing again changes nothing.
    await env.DB.prepare("UPDATE approvals SET expires_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 1000).toISOString(), hold.body.approvalId)
      .run();
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const expired = await env.DB.prepare("SELECT status, decided_at AS decidedAt FROM approvals WHERE id = ?")
      .bind(hold.body.approvalId)
      .first<{ status: string; decidedAt: string }>();
    expect(expired?.status).toBe("expired");
    await runDurableObjectAlarm(stub);
    const again = await env.DB.prepare("SELECT status, decided_at AS decidedAt FROM approvals WHERE id = ?")
      .bind(hold.body.approvalId)
      .first<{ status: string; decidedAt: string }>();
    expect(again).toEqual(expired);
    // The charge stays pending and payable.
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
  });
});
