import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/config/env";
import { type Facilitator, facilitatorOf } from "../../src/x402/facilitator";
import { FacilitatorRequest } from "../../src/x402/facilitator-protocol";
import { settleForMerchant } from "../../src/x402/facilitator-service";
import { api, consoleToken } from "../helpers/api";
import { facilitatorTerms, v2Request } from "../helpers/facilitator";
import { createMerchant, merchantBalance } from "../helpers/factories";
import { x } from "../helpers/settle-outcomes";
import { freshPayer } from "../helpers/x402";

/*
 * A merchant's own route states its terms in the request, so the service starts the chain's check of
 * a facilitated payment (one JSON-RPC batch) before its lookups read, not after them. What the
 * lookups find still decides first; a payment our own checks refuse never reaches the chain.
 */

const CENT = 10_000n;

/** The service's own facilitator, counting its verifications into `order`. */
function counted(order: string[]): Facilitator {
  const real = facilitatorOf(env as Env, x());
  return {
    ...real,
    verify: (payment, terms) => {
      order.push("chain check");
      return real.verify(payment, terms);
    },
    settle: (payment, terms) => real.settle(payment, terms),
  };
}

/** The same bindings, with the control database's batches written into `order` as they start. */
function readsInto(order: string[]): Env {
  const db = env.DB;
  const spied = new Proxy(db, {
    get(target, key) {
      if (key === "batch")
        return (statements: D1PreparedStatement[]) => {
          order.push("d1 batch");
          return db.batch(statements);
        };
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { ...(env as Env), DB: spied };
}

async function merchantRoute(name: string) {
  const merchant = await createMerchant({ name });
  const terms = await facilitatorTerms(merchant.apiKey);
  await settleForMerchant(env as Env, x(), merchant.merchantId, await warmUp(terms), undefined);
  return { merchant, terms };
}

/** One settlement first, so the merchant's facts are held and the order below is the payment's own. */
async function warmUp(terms: Awaited<ReturnType<typeof facilitatorTerms>>) {
  const payer = await freshPayer(100_000n);
  return FacilitatorRequest.parse(
    await v2Request(payer.key, terms, { value: CENT, resource: "https://ahead.example/a" }),
  );
}

describe("facilitator settle: the chain's check goes out before the lookups read", () => {
  it("the one chain check starts before the first database batch, and the payment settles once", async () => {
    const { merchant, terms } = await merchantRoute("Ahead Shop");
    const payer = await freshPayer(1_000_000n);
    const request = FacilitatorRequest.parse(
      await v2Request(payer.key, terms, { value: 3n * CENT, resource: "https://ahead.example/call" }),
    );
    const order: string[] = [];
    const answer = await settleForMerchant(readsInto(order), x(), merchant.merchantId, request, counted(order));
    expect(answer).toMatchObject({ success: true });
    expect(order.filter((step) => step === "chain check")).toHaveLength(1);
    expect(order[0]).toBe("chain check");
    expect(order.slice(1)).toContain("d1 batch");
    expect(await merchantBalance(merchant.apiKey)).toBe(4);
  });

  it("a payment our checks refuse (an expired authorization) never reaches the chain", async () => {
    const { merchant, terms } = await merchantRoute("Ahead Expired Shop");
    const payer = await freshPayer(1_000_000n);
    const request = FacilitatorRequest.parse(
      await v2Request(payer.key, terms, {
        value: CENT,
        resource: "https://ahead.example/call",
        authorization: { validBefore: BigInt(Math.floor(Date.now() / 1000) - 60) },
      }),
    );
    const order: string[] = [];
    const answer = await settleForMerchant(env as Env, x(), merchant.merchantId, request, counted(order));
    expect(answer).toMatchObject({
      success: false,
      errorReason: "invalid_exact_evm_payload_authorization_valid_before",
    });
    expect(order).toEqual([]);
  });

  it("a settled payload sent again: the lookups answer it with its transaction, whatever the chain now says", async () => {
    const { merchant, terms } = await merchantRoute("Ahead Replay Shop");
    const payer = await freshPayer(1_000_000n);
    const request = FacilitatorRequest.parse(
      await v2Request(payer.key, terms, { value: 2n * CENT, resource: "https://ahead.example/call" }),
    );
    const first = await settleForMerchant(env as Env, x(), merchant.merchantId, request, undefined);
    expect(first).toMatchObject({ success: true });
    const order: string[] = [];
    const again = await settleForMerchant(env as Env, x(), merchant.merchantId, request, counted(order));
    expect(again).toEqual(first);
    expect(await merchantBalance(merchant.apiKey)).toBe(3);
  });

  it("a fresh authorization is reserved in the request's only database batch: nothing is read before it", async () => {
    const { merchant, terms } = await merchantRoute("Ahead Fresh Shop");
    const payer = await freshPayer(1_000_000n);
    const request = FacilitatorRequest.parse(
      await v2Request(payer.key, terms, { value: 5n * CENT, resource: "https://ahead.example/fresh" }),
    );
    const order: string[] = [];
    const answer = await settleForMerchant(readsInto(order), x(), merchant.merchantId, request, counted(order));
    expect(answer).toMatchObject({ success: true });
    expect(order).toEqual(["chain check", "d1 batch"]);
    const row = await env.DB.prepare("SELECT status, value FROM x402_payments WHERE payer = ? AND nonce = ?")
      .bind(payer.address.toLowerCase(), request.paymentPayload.payload.authorization.nonce.toLowerCase())
      .first();
    expect(row).toEqual({ status: "settled", value: String(5n * CENT) });
    expect(await merchantBalance(merchant.apiKey)).toBe(6);
  });

  it("a payer on the operators' blocklist: refused with nothing written, though the chain passed it", async () => {
    const { merchant, terms } = await merchantRoute("Ahead Blocked Shop");
    const payer = await freshPayer(1_000_000n);
    const listed = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: payer.address, reason: "test: a screened payer of a merchant's route" },
    });
    expect(listed.status).toBe(201);
    const request = FacilitatorRequest.parse(
      await v2Request(payer.key, terms, { value: 2n * CENT, resource: "https://ahead.example/blocked" }),
    );
    const order: string[] = [];
    const answer = await settleForMerchant(env as Env, x(), merchant.merchantId, request, counted(order));
    expect(answer).toMatchObject({ success: false, errorReason: "invalid_payment" });
    // The chain's check went out (the payment passed our offline checks); the screening refused it.
    expect(order).toEqual(["chain check"]);
    const written = await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE payer = ?")
      .bind(payer.address.toLowerCase())
      .first<{ n: number }>();
    expect(written?.n).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(1);
  });
});
