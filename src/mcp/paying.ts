import { z } from "zod";
import { outcomeReply, type PaidView, type PayOutcome, refusalError } from "../agents/outcomes";
import {
  IDEMPOTENCY_KEY_SHAPE,
  idempotencyScope,
  type KeyedRequest,
  keepAnswer,
  reserveKeyOrWait,
} from "../auth/idempotency";
import type { ChargeView } from "../charges/service";
import { type Env, settingsOf } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import { type AnswerHome, answersOf } from "../ledger/answers-place";
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { refusalAgain } from "../lib/errors";
import { dollarsOfBaseUnits } from "../lib/money";
import { chargeReceipt } from "../receipts/service";
import type { ToolAnswer, ToolContext } from "./define";

/*
 * The paying tools' answers and their `idempotencyKey`: the key is the
 * `Idempotency-Key` header's, reserved, kept and replayed by the same code
 * (auth/idempotency.ts) under the same agent scope, and the wallet stores the
 * HTTP route's answer in the payment's own batch. A tool answer is made from
 * that route answer, live or replayed, by one function, so both read alike.
 */

export const usd = (minor: number, currency = "USD") => `${(minor / 100).toFixed(2)} ${currency}`;

/** An exact amount in token base units (6 decimals), with every place it needs ("0.001 USD"). */
export const usdOfBaseUnits = (baseUnits: string, currency = "USD") =>
  `${dollarsOfBaseUnits(BigInt(baseUnits))} ${currency}`;

/** A paid charge's signed receipt (as GET /charges/:chargeId/receipt), or null while it is not paid. */
export const receiptOf = (ctx: ToolContext, chargeId: string) =>
  chargeReceipt(ctx.env, settingsOf(ctx.env).proofs, chargeId);

/** The paying tools' optional argument; its words are for the model that chooses it. */
export const IdempotencyKeyArg = z
  .string()
  .regex(IDEMPOTENCY_KEY_SHAPE, "1 to 255 printable ASCII characters")
  .optional()
  .describe(
    "Strongly recommended: a new unique key for this one purchase (for example a UUID; 1 to 255 printable ASCII characters). If the answer is lost, times out or is unclear, repeat the call with the SAME key and the same arguments: you get the first call's answer and nothing is paid twice. Use a new key only for a new purchase. Kept 24 hours.",
  );

/** What to tell a model about retries, in every paying tool's description. */
export const RETRY_RULE =
  "Retries: never pay again just because an answer was lost or unclear. Repeat the call with the SAME idempotencyKey: it returns the first outcome, also when the calls run at the same time (a later call waits for the first and answers the same). Error 409 idempotency_key_in_use means the first call was still running after about 25 seconds: wait and repeat with the same key, or, if you know the chargeId, call get_charge to see whether it is paid. The same key with other arguments is refused (409 idempotency_key_reused).";

/** A payment's answer as its HTTP route gives it, and as an idempotency key keeps it. */
interface RouteReply {
  status: number;
  body: Record<string, unknown>;
}

/** An outcome as its route answers it (src/agents/outcomes.ts); a refusal as `app.onError` renders it. */
function routeReply(outcome: PayOutcome, view: PaidView): RouteReply {
  if (outcome.kind === "paid" || outcome.kind === "approval") return outcomeReply(outcome, view, "agent");
  const refusal = refusalError(outcome, "agent");
  return { status: refusal.status, body: { ...refusal.extra, error: refusal.error } };
}

/**
 * A route answer as the tool answers it: paid, with the charge's receipt
 * (read again on a replay, as GET /charges/:chargeId/receipt reads it);
 * held for a human, not an error; anything else the same refusal as live.
 */
async function toolAnswer(ctx: ToolContext, { status, body }: RouteReply, replayed: boolean): Promise<ToolAnswer> {
  const replay = replayed ? " Replayed: the first answer to this idempotencyKey; nothing was paid again." : "";
  if (status === 200) {
    const charge = body.charge as ChargeView;
    return {
      body: { ...body, receipt: await receiptOf(ctx, charge.chargeId) },
      summary: `Paid charge ${charge.chargeId}: ${usdOfBaseUnits(charge.amountBaseUnits, charge.currency)}, reference ${charge.reference}.${replay}`,
    };
  }
  if (status === 402 && body.pendingApproval === true) {
    const { reason, approvalId, expiresAt } = body;
    const { chargeId } = body.charge as ChargeView;
    return {
      body,
      summary: `Held for human approval (${reason}): approval ${approvalId} for charge ${chargeId}, expires ${expiresAt}. Nothing was charged; a console user grants or rejects it.${replay}`,
    };
  }
  // A refusal the route rendered from an ApiError (live, or kept under the key): the same error again.
  throw refusalAgain(status, body);
}

/**
 * Where a tool call's key is reserved and what it reserves: where the answer
 * of the agent's payment lives (the ledger's rule, as for the HTTP routes: with
 * the agent's money, where the wallet's payment stores its answer), the agent's
 * scope, and the request as the tool's name and its other arguments, which no
 * HTTP request hashes to.
 */
export async function toolKey(
  env: Env,
  agentId: string,
  tool: string,
  key: string,
  request: Record<string, unknown>,
): Promise<{ db: D1Database; home: AnswerHome; keyed: KeyedRequest }> {
  const home = await answersOf(env).homeOf({ act: "pays", actor: { kind: "agent", agentId } });
  return {
    db: home.db,
    home,
    keyed: {
      scope: await idempotencyScope({ kind: "agent", agentId }),
      key,
      requestHash: await sha256Hex(`MCP tools/call ${tool}\n${canonicalJson(request)}`),
    },
  };
}

/**
 * Pays once per key: without `idempotencyKey` every call runs; with one, the
 * first call reserves it (`toolKey`), the wallet stores the route answer in
 * the payment's batch, and a repeat gets that answer back: one that overlaps
 * the first waits for it (`reserveKeyOrWait`: a model may send its calls at
 * once), 409 only if the first still runs after that wait, 409 for other
 * arguments.
 */
export async function payOnce(
  ctx: ToolContext,
  tool: string,
  { idempotencyKey, ...request }: { idempotencyKey?: string | undefined },
  view: PaidView,
  pay: (slot: IdempotencySlot | undefined) => Promise<PayOutcome>,
): Promise<ToolAnswer> {
  if (idempotencyKey === undefined) return toolAnswer(ctx, routeReply(await pay(undefined), view), false);
  const { db, home, keyed } = await toolKey(ctx.env, ctx.agentId, tool, idempotencyKey, request);
  const material = settingsOf(ctx.env).webhookSecretsKey;
  const reservation = await reserveKeyOrWait(db, material, keyed);
  if (reservation.kind === "replay") {
    const { status, body } = reservation.answer;
    return toolAnswer(ctx, { status, body: JSON.parse(body) }, true);
  }
  const { reply } = await keepAnswer(db, material, reservation.slot, async () => {
    // As the HTTP routes do: a first call that crossed shards and lost its answer (its 5xx freed the
    // key before its transfer settled) is answered with that payment, never paid a second time.
    const earlier = await home.earlier(reservation.slot);
    const reply = earlier ? { status: 200, body: earlier } : routeReply(await pay(reservation.slot), view);
    const text = JSON.stringify(reply.body);
    return { reply, status: reply.status, contentType: "application/json", body: async () => text };
  });
  return toolAnswer(ctx, reply, false);
}
