import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { sweepToSettlement } from "../../src/sweeps/run";
import { api } from "../helpers/api";
import { chargesOf, facilitatorTerms, settle, v2Request } from "../helpers/facilitator";
import { createMerchant, merchantBalance } from "../helpers/factories";
import { refund, refundsOf } from "../helpers/money-out";
import { waitFor } from "../helpers/wait";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { freshPayer, tokenBalance } from "../helpers/x402";

/*
 * A payment settled through the service as a merchant's facilitator is an x402 charge like any
 * other: charge.succeeded, a refund on chain to the payer, a sweep from the merchant's address.
 */

const CENT = 10_000n;
const x = () => settingsOf(env).x402!;

describe("a facilitated payment's charge", () => {
  it("fires charge.succeeded, is refunded on chain to the payer, and is swept to the settlement address", async () => {
    const merchant = await createMerchant({ name: "Facilitated Money Shop" });
    const hook = `facilitated-${crypto.randomUUID().slice(0, 8)}`;
    await registerEndpoint(hook, { merchantId: merchant.merchantId });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(40n * CENT);
    const body = await v2Request(payer.key, terms, { value: 40n * CENT, resource: "https://api.money.example/a" });
    const settled = await settle(merchant.apiKey, body);
    expect(settled.body.success).toBe(true);
    const [charge] = await chargesOf(merchant.apiKey);
    const chargeId = charge!.chargeId as string;

    const events = (
      await waitForReceived(hook, (l) =>
        ["charge.created", "charge.succeeded"].every((type) => l.some((d) => JSON.parse(d.body).type === type)),
      )
    ).map((d) => JSON.parse(d.body) as { type: string; data: Record<string, unknown> });
    // Born pending in the reservation's batch, paid by the settlement's.
    expect(events.find((e) => e.type === "charge.created")?.data).toMatchObject({ chargeId, amountMinor: 40 });
    expect(events.find((e) => e.type === "charge.succeeded")!.data).toMatchObject({
      chargeId,
      merchantId: merchant.merchantId,
      method: "x402",
      reference: settled.body.transaction,
      payer: payer.address.toLowerCase(),
    });

    const refunded = await refund(merchant.apiKey, chargeId, { amountUsdCents: 15 });
    expect(refunded.status, refunded.text).toBe(201);
    expect(refunded.body.refund).toMatchObject({ method: "x402", amountMinor: 15 });
    expect(await merchantBalance(merchant.apiKey)).toBe(25);
    const done = await waitFor(
      "the refund",
      async () =>
        (await refundsOf(merchant.apiKey, chargeId)).find((r) => r.refundId === refunded.body.refund.refundId)!,
      (r) => r.status !== "pending",
    );
    expect(done.status).toBe("succeeded");
    expect(await tokenBalance(payer.address)).toBe(15n * CENT);

    expect(await tokenBalance(terms.payTo)).toBe(40n * CENT);
    await sweepToSettlement(env, x());
    await sweepToSettlement(env, x());
    expect(await tokenBalance(terms.payTo)).toBe(0n);
    const { nonce } = body.paymentPayload.payload.authorization;
    const report = await api("GET", `/x402/settlements?payer=${payer.address}&nonce=${nonce}`);
    expect(report.body).toMatchObject({ status: "settled", chargeId, transaction: settled.body.transaction });
  });
});
