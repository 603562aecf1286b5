import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { type ApiResponse, api } from "../helpers/api";
import { createAgent, createCharge, createCheckoutLink, createMerchant, merchantBalance } from "../helpers/factories";
import {
  chain,
  freshPayer,
  type Payer,
  payToOf,
  publicClient,
  TOKEN_ABI,
  tokenBalance,
  xPaymentHeader,
} from "../helpers/x402";

/*
 * An x402 authorization pays only the charge (or the one checkout-link payment) it was made for:
 * each charge and link has its own receiving address as its `payTo`, and the payer signs `to`.
 * Made for one and sent to another (another merchant's included), it is refused with 402 and the
 * one it was made for still takes it. Payers are fresh keys, so every balance here is exact.
 */
const CENTS = 170;
const VALUE = BigInt(CENTS) * 10_000n;

const chargePath = (chargeId: string) => `/charges/${chargeId}/x402`;
const linkPath = (token: string) => `/checkout/${token}/x402`;
const send = (path: string, header: string) => api("GET", path, { headers: { "X-PAYMENT": header } });
const authorizationUsed = (from: Hex, nonce: Hex) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [from, nonce],
  });

async function linkPayments(merchantKey: string, token: string) {
  const res = await api("GET", "/merchant/checkout-links?limit=100", { token: merchantKey });
  return res.body.links.find((l: { checkoutToken: string }) => l.checkoutToken === token).paymentsCount as number;
}

/** A refusal of a payment made for something else: 402 Pago inválido with this resource's own terms, and nothing of the other. */
function expectRefusedElsewhere(res: ApiResponse, ownPayTo: Hex, otherIds: string[]) {
  expect(res.status).toBe(402);
  expect(res.body.error).toBe("Pago inválido");
  expect(res.body.invalidReason).toMatch(/recipient_mismatch|nonce_already_used/);
  expect(res.body.accepts[0].payTo).toBe(ownPayTo);
  for (const id of otherIds) expect(res.text).not.toContain(id);
  expect(res.headers.get("X-PAYMENT-RESPONSE")).toBeNull();
}

let m0: { merchantId: string; apiKey: string };
let m1: { merchantId: string; apiKey: string };
beforeAll(async () => {
  [m0, m1] = await Promise.all([createMerchant({ name: "Bound Shop 0" }), createMerchant({ name: "Bound Shop 1" })]);
});

describe("receiving addresses", () => {
  it("each charge and each checkout link has its own payTo, the same in every 402 and in both versions, derived from the receiving key", async () => {
    const [c1, c2, c3] = await Promise.all([
      createCharge(m0.apiKey, CENTS),
      createCharge(m0.apiKey, CENTS),
      createCharge(m1.apiKey, CENTS),
    ]);
    const [l1, l2] = await Promise.all([
      createCheckoutLink(m0.apiKey, CENTS, "bound link"),
      createCheckoutLink(m1.apiKey, CENTS, "bound link"),
    ]);
    const paths = [
      chargePath(c1.chargeId),
      chargePath(c2.chargeId),
      chargePath(c3.chargeId),
      linkPath(l1.checkoutToken),
      linkPath(l2.checkoutToken),
    ];
    // First asked for all at once: concurrent first uses get distinct addresses.
    const first = await Promise.all(paths.map(payToOf));
    expect(new Set(first.map((a) => a.toLowerCase())).size).toBe(5);
    expect(first.map((a) => a.toLowerCase())).not.toContain(chain().payTo.toLowerCase());
    for (const [i, path] of paths.entries()) {
      const again = await api("GET", path);
      expect(again.body.accepts[0].payTo).toBe(first[i]);
      const v2 = JSON.parse(atob(again.headers.get("PAYMENT-REQUIRED")!));
      expect(v2.accepts[0].payTo).toBe(first[i]);
    }
    // Recorded with its owner and merchant, at a BIP-44 index of account 1 of the receiving key.
    const rows = await env.DB.prepare(
      "SELECT idx, owner_id AS ownerId, owner_kind AS kind, merchant_id AS merchantId, address FROM receiving_addresses WHERE owner_id IN (?, ?, ?, ?, ?)",
    )
      .bind(c1.chargeId, c2.chargeId, c3.chargeId, l1.checkoutLinkId, l2.checkoutLinkId)
      .all<{ idx: number; ownerId: string; kind: string; merchantId: string; address: string }>();
    const byOwner = new Map(rows.results.map((r) => [r.ownerId, r]));
    expect(byOwner.get(c3.chargeId)).toMatchObject({ kind: "charge", merchantId: m1.merchantId });
    expect(byOwner.get(l1.checkoutLinkId)).toMatchObject({ kind: "checkout_link", merchantId: m0.merchantId });
    const owners = [c1.chargeId, c2.chargeId, c3.chargeId, l1.checkoutLinkId, l2.checkoutLinkId];
    for (const [i, owner] of owners.entries()) {
      const row = byOwner.get(owner)!;
      expect(row.address).toBe(first[i]!.toLowerCase());
      expect(mnemonicToAccount(env.DEPOSIT_MNEMONIC!, { accountIndex: 1, addressIndex: row.idx }).address).toBe(
        first[i],
      );
    }
  });
});

describe("an authorization made for one charge or link", () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await freshPayer(20n * VALUE);
  });

  it("made for another merchant's charge of the same amount: 402 there, nothing moves; it still pays its own charge", async () => {
    const c1 = await createCharge(m0.apiKey, CENTS);
    const c2 = await createCharge(m1.apiKey, CENTS);
    const [payTo1, payTo2] = [await payToOf(chargePath(c1.chargeId)), await payToOf(chargePath(c2.chargeId))];
    const { header, payload } = await xPaymentHeader(payer.key, VALUE, { to: payTo1 });
    const before = {
      m0: await merchantBalance(m0.apiKey),
      m1: await merchantBalance(m1.apiKey),
      payer: await tokenBalance(payer.address),
    };

    expectRefusedElsewhere(await send(chargePath(c2.chargeId), header), payTo2, [c1.chargeId]);
    expect((await api("GET", `/charges/${c2.chargeId}`)).body).toMatchObject({ status: "pending", reference: null });
    expect(await merchantBalance(m1.apiKey)).toBe(before.m1);
    expect(await tokenBalance(payer.address)).toBe(before.payer);
    expect(await authorizationUsed(payer.address, payload.authorization.nonce)).toBe(false);
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE nonce = ?")
        .bind(payload.authorization.nonce.toLowerCase())
        .first(),
    ).toEqual({ n: 0 });

    const paid = await send(chargePath(c1.chargeId), header);
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ chargeId: c1.chargeId, status: "paid" });
    expect(await merchantBalance(m0.apiKey)).toBe(before.m0 + CENTS);
    expect(await merchantBalance(m1.apiKey)).toBe(before.m1);
    expect(await tokenBalance(payTo1)).toBe(VALUE);
    expect(await tokenBalance(payTo2)).toBe(0n);
    // Settled, it is refused on the other charge too, still naming nothing of the first.
    expectRefusedElsewhere(await send(chargePath(c2.chargeId), header), payTo2, [
      c1.chargeId,
      paid.body.settlement.transaction,
    ]);
    expect((await api("GET", `/charges/${c2.chargeId}`)).body.status).toBe("pending");
  });

  it("made for one merchant's checkout link, sent to another's of the same amount: 402, no charge made there; it pays its own link", async () => {
    const l0 = await createCheckoutLink(m0.apiKey, 50, "bound link");
    const l1 = await createCheckoutLink(m1.apiKey, 50, "bound link");
    const payTo0 = await payToOf(linkPath(l0.checkoutToken));
    const payTo1 = await payToOf(linkPath(l1.checkoutToken));
    const { header } = await xPaymentHeader(payer.key, 500_000n, { to: payTo0 });
    const before = await merchantBalance(m1.apiKey);

    for (const method of ["POST", "GET"]) {
      const res = await api(method, linkPath(l1.checkoutToken), { headers: { "X-PAYMENT": header } });
      expectRefusedElsewhere(res, payTo1, [l0.checkoutLinkId, l0.checkoutToken]);
    }
    expect(await linkPayments(m1.apiKey, l1.checkoutToken)).toBe(0);
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM charges WHERE checkout_link_id = ?")
        .bind(l1.checkoutLinkId)
        .first(),
    ).toEqual({ n: 0 });
    expect(await merchantBalance(m1.apiKey)).toBe(before);

    const paid = await api("POST", linkPath(l0.checkoutToken), { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    expect(await linkPayments(m0.apiKey, l0.checkoutToken)).toBe(1);
    expect(await tokenBalance(payTo0)).toBe(500_000n);
  });

  it("across kinds: a link's authorization on a charge, a charge's on a link, are refused; each pays its own", async () => {
    const charge = await createCharge(m1.apiKey, CENTS);
    const link = await createCheckoutLink(m0.apiKey, CENTS, "bound link");
    const chargePayTo = await payToOf(chargePath(charge.chargeId));
    const linkPayTo = await payToOf(linkPath(link.checkoutToken));
    const forCharge = await xPaymentHeader(payer.key, VALUE, { to: chargePayTo });
    const forLink = await xPaymentHeader(payer.key, VALUE, { to: linkPayTo });

    expectRefusedElsewhere(
      await api("POST", linkPath(link.checkoutToken), { headers: { "X-PAYMENT": forCharge.header } }),
      linkPayTo,
      [charge.chargeId],
    );
    expectRefusedElsewhere(await send(chargePath(charge.chargeId), forLink.header), chargePayTo, [link.checkoutLinkId]);
    expect((await send(chargePath(charge.chargeId), forCharge.header)).status).toBe(200);
    expect((await api("POST", linkPath(link.checkoutToken), { headers: { "X-PAYMENT": forLink.header } })).status).toBe(
      200,
    );
  });

  it("a charge born from a link (held for approval) has its own address: the link's authorization does not pay it", async () => {
    const link = await createCheckoutLink(m0.apiKey, CENTS, "bound link");
    const linkPayTo = await payToOf(linkPath(link.checkoutToken));
    const agent = await createAgent({ credit: 1000, policy: { approvalThresholdUsdCents: 1 } });
    const held = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    expect(held.status).toBe(402);
    const chargeId = held.body.charge.chargeId as string;
    const ownPayTo = await payToOf(chargePath(chargeId));
    expect(ownPayTo.toLowerCase()).not.toBe(linkPayTo.toLowerCase());
    const forLink = await xPaymentHeader(payer.key, VALUE, { to: linkPayTo });
    expectRefusedElsewhere(await send(chargePath(chargeId), forLink.header), ownPayTo, [link.checkoutLinkId]);
    expect((await api("GET", `/charges/${chargeId}`)).body.status).toBe("pending");
  });

  it("v2 with `accepted` and `resource` rewritten to name another charge: refused, since the signed `to` is the first charge's", async () => {
    const c1 = await createCharge(m0.apiKey, CENTS);
    const c2 = await createCharge(m1.apiKey, CENTS);
    const offer1 = await api("GET", chargePath(c1.chargeId));
    const offer2 = await api("GET", chargePath(c2.chargeId));
    const required2 = JSON.parse(atob(offer2.headers.get("PAYMENT-REQUIRED")!));
    const payload = (await xPaymentHeader(payer.key, VALUE, { to: offer1.body.accepts[0].payTo })).payload;
    const forged = btoa(
      JSON.stringify({ x402Version: 2, resource: required2.resource, accepted: required2.accepts[0], payload }),
    );
    const res = await api("GET", chargePath(c2.chargeId), { headers: { "PAYMENT-SIGNATURE": forged } });
    expectRefusedElsewhere(res, required2.accepts[0].payTo, [c1.chargeId]);
    expect(await authorizationUsed(payer.address, payload.authorization.nonce as Hex)).toBe(false);
  });
});

describe("how the payment header is read", () => {
  it("an address's letter case does not matter (EIP-712 signs its bytes); a header with a key twice is refused", async () => {
    const payer = await freshPayer(2n * VALUE);
    const charge = await createCharge(m0.apiKey, CENTS);
    const payTo = await payToOf(chargePath(charge.chargeId));
    const { payload } = await xPaymentHeader(payer.key, VALUE, { to: payTo });
    const upper = (a: string) => `0x${a.slice(2).toUpperCase()}`;
    const shouting = {
      ...payload,
      authorization: {
        ...payload.authorization,
        from: upper(payload.authorization.from),
        to: upper(payload.authorization.to),
      },
    };
    const envelope = (p: unknown) => ({ x402Version: 1, scheme: "exact", network: "base-sepolia", payload: p });
    // The same payload with `value` given twice, the second a cent more: one reader could see either.
    const twice = JSON.stringify(envelope(shouting)).replace(
      `"value":"${VALUE}"`,
      `"value":"${VALUE}","value":"${VALUE + 10_000n}"`,
    );
    expect(twice).toContain(`"value":"${VALUE + 10_000n}"`);
    const refused = await send(chargePath(charge.chargeId), btoa(twice));
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({ error: "Pago inválido", invalidReason: "invalid_payload" });

    const paid = await send(chargePath(charge.chargeId), btoa(JSON.stringify(envelope(shouting))));
    expect(paid.status).toBe(200);
    expect(await tokenBalance(payTo)).toBe(VALUE);
  });
});

describe("one header sent to two charges", () => {
  let payer: Payer;
  beforeAll(async () => {
    payer = await freshPayer(10n * VALUE);
  });

  /** Two charges of two merchants, and a header made for the first. */
  async function pair() {
    const c1 = await createCharge(m0.apiKey, CENTS);
    const c2 = await createCharge(m1.apiKey, CENTS);
    const payTo1 = await payToOf(chargePath(c1.chargeId));
    const payTo2 = await payToOf(chargePath(c2.chargeId));
    const { header, payload } = await xPaymentHeader(payer.key, VALUE, { to: payTo1 });
    return { c1, c2, payTo1, payTo2, header, nonce: payload.authorization.nonce };
  }

  async function expectPaidOnceOnFirst(p: Awaited<ReturnType<typeof pair>>) {
    expect((await api("GET", `/charges/${p.c1.chargeId}`)).body).toMatchObject({ status: "paid", method: "x402" });
    expect((await api("GET", `/charges/${p.c2.chargeId}`)).body).toMatchObject({ status: "pending", reference: null });
    expect(await tokenBalance(p.payTo1)).toBe(VALUE);
    expect(await tokenBalance(p.payTo2)).toBe(0n);
    const rows = await env.DB.prepare("SELECT charge_id AS chargeId, status FROM x402_payments WHERE nonce = ?")
      .bind(p.nonce.toLowerCase())
      .all();
    expect(rows.results).toEqual([{ chargeId: p.c1.chargeId, status: "settled" }]);
  }

  it("at once: the charge it was made for is paid (200), the other refused (402) naming nothing of the first", async () => {
    for (let round = 0; round < 3; round++) {
      const p = await pair();
      const m1Before = await merchantBalance(m1.apiKey);
      // Both orders of arrival, and together.
      const [own, other] =
        round === 0
          ? await Promise.all([send(chargePath(p.c1.chargeId), p.header), send(chargePath(p.c2.chargeId), p.header)])
          : round === 1
            ? (
                await Promise.all([
                  send(chargePath(p.c2.chargeId), p.header),
                  send(chargePath(p.c1.chargeId), p.header),
                ])
              ).reverse()
            : await Promise.all([
                send(chargePath(p.c1.chargeId), p.header),
                new Promise((r) => setTimeout(r, 5)).then(() => send(chargePath(p.c2.chargeId), p.header)),
              ]);
      expect(own!.status).toBe(200);
      expect(own!.body).toMatchObject({ chargeId: p.c1.chargeId, status: "paid" });
      expectRefusedElsewhere(other!, p.payTo2, [p.c1.chargeId]);
      await expectPaidOnceOnFirst(p);
      expect(await merchantBalance(m1.apiKey)).toBe(m1Before);
    }
  });

  it("one after the other, in both orders: the other charge is refused before and after the first is paid", async () => {
    const first = await pair();
    expectRefusedElsewhere(await send(chargePath(first.c2.chargeId), first.header), first.payTo2, [first.c1.chargeId]);
    expect((await send(chargePath(first.c1.chargeId), first.header)).status).toBe(200);
    await expectPaidOnceOnFirst(first);

    const second = await pair();
    expect((await send(chargePath(second.c1.chargeId), second.header)).status).toBe(200);
    expectRefusedElsewhere(await send(chargePath(second.c2.chargeId), second.header), second.payTo2, [
      second.c1.chargeId,
    ]);
    await expectPaidOnceOnFirst(second);
  });
});
