import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { freshPayer, tokenBalance, xPaymentFor } from "../helpers/x402";

/*
 * Regression: granting a held checkout-link payment after the merchant had
 * disabled the link paid it, and so did another agent's wallet. Every payment
 * of a charge born from a link re-checks the link in its batch
 * (docs/decisions.md, checkout links): 409 checkout_link_disabled (402 Pago
 * inválido for x402), nothing moves, the approval stays pending.
 */
const grant = async (id: string) => api("POST", `/approvals/${id}/grant`, { token: await consoleToken() });
const setActive = (merchantKey: string, token: string, active: boolean) =>
  api("PATCH", `/merchant/checkout-links/${token}`, { token: merchantKey, body: { active } });

async function stateOf(approvalId: string, chargeId: string, linkId: string) {
  const approval = await env.DB.prepare("SELECT status FROM approvals WHERE id = ?")
    .bind(approvalId)
    .first<{ status: string }>();
  const charge = await env.DB.prepare("SELECT status FROM charges WHERE id = ?")
    .bind(chargeId)
    .first<{ status: string }>();
  const link = await env.DB.prepare(
    "SELECT payments_count AS paymentsCount, total_paid_minor AS totalPaidMinor FROM checkout_links WHERE id = ?",
  )
    .bind(linkId)
    .first();
  const events = await env.DB.prepare(
    "SELECT COUNT(*) AS n FROM outbox_events WHERE type IN ('payment.succeeded', 'charge.succeeded') AND json_extract(data, '$.chargeId') = ?",
  )
    .bind(chargeId)
    .first<{ n: number }>();
  return { approval: approval?.status, charge: charge?.status, link, paymentEvents: events?.n };
}

describe("granting a held checkout-link payment", () => {
  it("after the link was disabled: 409 checkout_link_disabled, nothing paid, the approval stays pending; enabled again, the grant pays", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000, policy: { approvalThresholdUsdCents: 500 } });
    const link = (
      await api("POST", "/merchant/checkout", {
        token: merchant.apiKey,
        body: { amountUsdCents: 700, description: "one report" },
      })
    ).body;
    const held = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    expect(held.status).toBe(402);
    const { approvalId } = held.body;
    const chargeId = held.body.charge.chargeId as string;

    const off = await setActive(merchant.apiKey, link.checkoutToken, false);
    expect(off.status).toBe(200);
    expect(off.body.active).toBe(false);

    const refused = await grant(approvalId);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: "checkout_link_disabled" });
    expect(await stateOf(approvalId, chargeId, link.checkoutLinkId)).toEqual({
      approval: "pending",
      charge: "pending",
      link: { paymentsCount: 0, totalPaidMinor: 0 },
      paymentEvents: 0,
    });
    expect(await balanceOf(agent.apiKey)).toBe(5000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);

    expect((await setActive(merchant.apiKey, link.checkoutToken, true)).status).toBe(200);
    const granted = await grant(approvalId);
    expect(granted.status).toBe(200);
    expect(granted.body).toMatchObject({
      approval: { approvalId, status: "granted" },
      charge: { chargeId, status: "paid" },
    });
    expect(await stateOf(approvalId, chargeId, link.checkoutLinkId)).toEqual({
      approval: "granted",
      charge: "paid",
      link: { paymentsCount: 1, totalPaidMinor: 700 },
      paymentEvents: 2,
    });
    expect(await balanceOf(agent.apiKey)).toBe(4300);
  });

  it("after the link was disabled, no other path pays the charge born from it either: another agent's wallet 409, an x402 payment refused with nothing moved", async () => {
    const merchant = await createMerchant();
    const holder = await createAgent({ credit: 5000, policy: { approvalThresholdUsdCents: 500 } });
    const other = await createAgent({ credit: 5000 });
    const link = (
      await api("POST", "/merchant/checkout", {
        token: merchant.apiKey,
        body: { amountUsdCents: 700, description: "one report" },
      })
    ).body;
    const held = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: holder.apiKey });
    expect(held.status).toBe(402);
    const chargeId = held.body.charge.chargeId as string;
    expect((await setActive(merchant.apiKey, link.checkoutToken, false)).status).toBe(200);

    const paid = await api("POST", `/charges/${chargeId}/pay`, { token: other.apiKey });
    expect(paid.status).toBe(409);
    expect(paid.body).toEqual({ error: "checkout_link_disabled" });
    const payer = await freshPayer(700n * 10_000n);
    const { header } = await xPaymentFor(`/charges/${chargeId}/x402`, payer.key, 700n * 10_000n);
    const onChain = await api("GET", `/charges/${chargeId}/x402`, { headers: { "X-PAYMENT": header } });
    expect(onChain.status).toBe(402);
    expect(onChain.body).toMatchObject({ error: "Pago inválido", invalidReason: "invalid_transaction_state" });
    expect(await stateOf(held.body.approvalId, chargeId, link.checkoutLinkId)).toEqual({
      approval: "pending",
      charge: "pending",
      link: { paymentsCount: 0, totalPaidMinor: 0 },
      paymentEvents: 0,
    });
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE charge_id = ?").bind(chargeId).first(),
    ).toEqual({ n: 0 });
    expect(await balanceOf(other.apiKey)).toBe(5000);
    expect(await tokenBalance(payer.address)).toBe(700n * 10_000n);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
  });

  it("a held charge not born from a link is granted as before", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000, policy: { approvalThresholdUsdCents: 500 } });
    const charge = await createCharge(merchant.apiKey, 700);
    const held = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey });
    expect(held.status).toBe(402);
    const granted = await grant(held.body.approvalId);
    expect(granted.status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(4300);
  });
});
