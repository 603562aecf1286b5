import { type Context, Hono } from "hono";
import { cors } from "hono/cors";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { requireActor } from "../auth/middleware";
import { chargeView, getCharge } from "../charges/service";
import { checkoutLinkForPayment } from "../checkout/service";
import { placementOf } from "../ledger/place";
import type { CodeWith } from "../lib/error-codes";
import { ApiError } from "../lib/errors";
import { log } from "../lib/log";
import { pathId, validate } from "../lib/validation";
import type { X402Outcome } from "./outcome";
import { protocolReason } from "./reasons";
import { receivingReport } from "./receiving";
import { closedToOthers, payWithX402 } from "./service";
import { settlementByAuthorization, settlementById, settlementPath } from "./settlements";
import { termsForTarget, type X402Target } from "./target";
import { base64Json, caip2, type Terms } from "./terms";

const PAYMENT_HEADERS = ["X-PAYMENT", "PAYMENT-SIGNATURE"];

/** Browser clients: the 402 itself carries the origin header; payment headers allowed, response headers exposed. */
const x402Cors = cors({
  origin: "*",
  allowMethods: ["GET", "POST", "OPTIONS"],
  allowHeaders: [...PAYMENT_HEADERS, "Content-Type", "Access-Control-Expose-Headers"],
  exposeHeaders: ["PAYMENT-REQUIRED", "PAYMENT-RESPONSE", "X-PAYMENT-RESPONSE"],
  maxAge: 600,
});

const paymentHeaderOf = (c: Context<AppEnv>) => c.req.header("x-payment") ?? c.req.header("payment-signature") ?? null;

/** The URL of this resource, without query: the `resource` of the terms. */
const resourceOf = (c: Context<AppEnv>) => {
  const url = new URL(c.req.url);
  return `${url.origin}${url.pathname}`;
};

function x402Settings(c: Context<AppEnv>) {
  const x = c.get("settings").x402;
  if (!x) throw new ApiError(503, "x402_not_configured");
  return x;
}

/** The settlement in both versions' headers: v1 names the network, v2 gives its CAIP-2 id. */
function settlementHeaders(c: Context<AppEnv>, settlement: Record<string, unknown>) {
  const x = c.get("settings").x402;
  c.header("X-PAYMENT-RESPONSE", base64Json({ ...settlement, network: x?.network ?? "" }));
  c.header("PAYMENT-RESPONSE", base64Json({ ...settlement, network: x ? caip2(x.chainId) : "" }));
}

function paymentRequired(
  c: Context<AppEnv>,
  terms: Terms,
  error: CodeWith<402>,
  extra: Record<string, unknown> = {},
  settlement?: Record<string, unknown>,
) {
  c.header("Cache-Control", "no-store");
  // Version 2 clients read only this header: a refusal's reason code is its `error`, as the reference server sends it.
  const reason = extra.invalidReason ?? extra.errorReason;
  c.header(
    "PAYMENT-REQUIRED",
    base64Json(reason ? { ...terms.paymentRequired, error: reason } : terms.paymentRequired),
  );
  if (settlement) settlementHeaders(c, settlement);
  return c.json({ x402Version: 1, error, accepts: [terms.v1], ...extra }, 402);
}

/** One table from x402 outcomes to responses. */
function respond(c: Context<AppEnv>, outcome: X402Outcome) {
  const network = c.get("settings").x402?.network ?? "";
  switch (outcome.kind) {
    case "terms":
      return paymentRequired(c, outcome.terms, "X-PAYMENT header is required");
    case "already_paid":
      return c.json(outcome.charge, 200);
    case "invalid":
      return paymentRequired(c, outcome.terms, "Pago inválido", {
        invalidReason: protocolReason(outcome.reason, "verify"),
      });
    case "settle_failed": {
      const errorReason = protocolReason(outcome.reason, "settle");
      return paymentRequired(
        c,
        outcome.terms,
        "Liquidación fallida",
        { errorReason },
        { success: false, transaction: "", network, payer: outcome.payer, errorReason },
      );
    }
    case "settled":
      // Settled on chain means paid: the credit either committed now or was made by reconciliation.
      settlementHeaders(c, { success: true, transaction: outcome.transaction, network, payer: outcome.payer });
      return c.json(
        {
          chargeId: outcome.chargeId,
          status: "paid",
          settlement: { success: true, transaction: outcome.transaction, settlementId: outcome.settlementId },
        },
        200,
      );
    case "pending":
      // Never a fresh 402 while a settlement may have moved money: the client asks the settlement, not pays again.
      c.header("Retry-After", "5");
      c.header("Location", settlementPath(outcome.settlementId));
      return c.json(
        {
          chargeId: outcome.chargeId,
          status: "pending",
          settlement: {
            success: false,
            pending: true,
            transaction: outcome.transaction,
            settlementId: outcome.settlementId,
          },
        },
        202,
      );
    case "unavailable":
      // Nothing was reserved and nothing sent: the same payment can simply be sent again. The cause stays in the log.
      log.warn("x402_verify", { error: outcome.error, reason: outcome.reason });
      c.header("Retry-After", "5");
      return c.json({ error: outcome.error }, 503);
    case "charge_not_found":
      throw new ApiError(404, "charge_not_found");
    case "not_payable":
      // Made by a merchant's facilitated settlement: no terms to pay it are offered to anyone.
      throw new ApiError(409, "charge_not_pending");
  }
}

export const ChargeParam = z.object({ chargeId: pathId });
export const ReceivingQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) }).strict();
export const TokenParam = z.object({ token: pathId });
export const SettlementParam = z.object({ settlementId: pathId });
export const SettlementQuery = z
  .object({
    payer: z.string().regex(/^0x[0-9a-fA-F]{40}$/, "an EVM address"),
    nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/, "the authorization's 32-byte nonce"),
  })
  .strict();

/** The checkout link as an x402 target; 404 unknown, 409 disabled. */
async function checkoutTarget(c: Context<AppEnv>, token: string): Promise<X402Target> {
  // The link lives in its merchant's shard, which its token names; a shard not run here has none.
  const at = placementOf(c.env).ofId(token);
  const found = at && (await checkoutLinkForPayment(at.db, token));
  if (!found) throw new ApiError(404, "checkout_link_not_found");
  if (!found.link.active) throw new ApiError(409, "checkout_link_disabled");
  return { kind: "checkout", link: found.link, merchantName: found.merchantName };
}

async function checkoutX402(c: Context<AppEnv>, token: string) {
  const x = x402Settings(c);
  const target = await checkoutTarget(c, token);
  const header = paymentHeaderOf(c);
  if (!header) return respond(c, { kind: "terms", terms: await termsForTarget(c.env, x, target, resourceOf(c)) });
  return respond(c, await payWithX402(c.env, target, resourceOf(c), header));
}

export const x402Routes = new Hono<AppEnv>()
  .use("/charges/:chargeId/x402", x402Cors)
  .use("/checkout/:token/x402", x402Cors)
  .use("/x402/settlements", x402Cors)
  .use("/x402/settlements/*", x402Cors)
  // What became of a payment, for a client that lost its answer: by the settlement id a 202 named, or by the authorization.
  .get("/x402/settlements/:settlementId", validate("param", SettlementParam), async (c) => {
    const found = await settlementById(c.env, x402Settings(c), c.req.valid("param").settlementId);
    if (!found) throw new ApiError(404, "settlement_not_found");
    c.header("Cache-Control", "no-store");
    return c.json(found);
  })
  .get("/x402/settlements", validate("query", SettlementQuery), async (c) => {
    const { payer, nonce } = c.req.valid("query");
    const found = await settlementByAuthorization(c.env, x402Settings(c), payer, nonce);
    if (!found) throw new ApiError(404, "settlement_not_found");
    c.header("Cache-Control", "no-store");
    return c.json(found);
  })
  .get("/charges/:chargeId/x402", validate("param", ChargeParam), async (c) => {
    const x = x402Settings(c);
    const { chargeId } = c.req.valid("param");
    const header = paymentHeaderOf(c);
    // A resent payment that settled this charge gets its settlement back; otherwise a paid charge answers with itself.
    // The charge is read with the payment's own lookups.
    if (header) return respond(c, await payWithX402(c.env, { kind: "charge_id", chargeId }, resourceOf(c), header));
    // The charge is read in its shard, which its id names; a shard not run here holds no charge.
    const at = placementOf(c.env).ofId(chargeId);
    const charge = at && (await getCharge(at.db, chargeId));
    if (!charge) throw new ApiError(404, "charge_not_found");
    const target: X402Target = { kind: "charge", charge };
    if (charge.status === "paid") return c.json(chargeView(charge), 200);
    if (closedToOthers(charge)) return respond(c, { kind: "not_payable" });
    return respond(c, { kind: "terms", terms: await termsForTarget(c.env, x, target, resourceOf(c)) });
  })
  // Official clients retry with the method of their first request, so GET with a payment settles too.
  .get("/checkout/:token/x402", validate("param", TokenParam), (c) => checkoutX402(c, c.req.valid("param").token))
  .post("/checkout/:token/x402", validate("param", TokenParam), (c) => checkoutX402(c, c.req.valid("param").token))
  // What x402 payments left on the receiving addresses (console): the ledger's figure and the chain's, side by side.
  .get("/console/x402/receiving-addresses", requireActor("console"), validate("query", ReceivingQuery), async (c) => {
    return c.json(await receivingReport(c.env, x402Settings(c), c.req.valid("query").limit));
  });
