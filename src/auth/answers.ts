import type { Context } from "hono";
import type { IdempotencySlot } from "../db/idempotency";
import type { AppEnv } from "./app-env";
import type { Actor } from "./credentials";

/*
 * Where a keyed request's answer is kept is the ledger's rule (src/ledger/answers-place.ts): the
 * answer lives with the money the request moves. This layer sits below the ledger and cannot
 * import it, so app.ts hands the rule to every request (`c.get("answers")`); these types are what
 * the idempotency middleware asks of it.
 */

/**
 * What a keyed request does with money, as its route declares it (`requireActor(kind, { money })`):
 * `"writes"`, it writes an owner's ledger rows and stores its answer in that batch (a charge, a
 * link, a payout, a refund, a credit, a payment of a charge the path names); `"pays"`, a payment
 * from an agent's wallet that a retry cannot find again by what it names (a PayLink draw, a
 * checkout payment, a grant), whose retry after a lost answer is answered with that payment.
 * Undeclared: the request moves no money, and its answer is kept in control.
 */
export type MoneyAct = "writes" | "pays";

/** A keyed request acting on money, as the rule reads it: who acts, and whom the path and body name. */
export interface MoneyRequest {
  act: MoneyAct;
  actor: Actor;
  pathAgentId?: string | undefined;
  pathId?: string | undefined;
  bodyAgentId?: (() => string | null) | undefined;
}

/** Where a request's key is reserved and its answer stored, and what a retry after a lost answer gets there. */
export interface AnswerHome {
  db: D1Database;
  earlier(slot: IdempotencySlot): Promise<Record<string, unknown> | null>;
}

/** Where keyed requests keep their answers in this deployment (the ledger's `answersOf`). */
export interface AnswerKeeping {
  /** Control: where every key is claimed with several shards, and where requests moving no money keep answers. */
  control: D1Database;
  sharded: boolean;
  homeOf(request: MoneyRequest): Promise<AnswerHome>;
}

/** The answers of this request's deployment, as app.ts set them. */
export function answersIn(c: Context<AppEnv>): AnswerKeeping {
  const answers = c.get("answers");
  if (!answers) throw new Error("no answer keeping: the app is built by buildApp (src/app.ts)");
  return answers;
}

/** Where a request that moves no money keeps its answer: control; it has no earlier payment to find. */
export const controlHome = (answers: AnswerKeeping): AnswerHome => ({
  db: answers.control,
  earlier: async () => null,
});

/**
 * The request as the rule reads it: the path's `:agentId`, the path's id (`:id`, or a `:…Id`), and
 * the `agentId` its body names (`body` is its text, as the key's hash reads it; a body that is not
 * JSON or names no usable agent names none: the validator refuses it after).
 */
export function moneyRequestOf(c: Context<AppEnv>, act: MoneyAct, actor: Actor, body: string): MoneyRequest {
  const params: Record<string, string> = c.req.param();
  const idParam = "id" in params ? "id" : Object.keys(params).find((name) => name.endsWith("Id") && name !== "agentId");
  return {
    act,
    actor,
    pathAgentId: params.agentId,
    pathId: idParam === undefined ? undefined : params[idParam],
    bodyAgentId: () => agentIdIn(body),
  };
}

function agentIdIn(text: string): string | null {
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  const agentId = body && typeof body === "object" && "agentId" in body ? body.agentId : null;
  return typeof agentId === "string" && agentId.length > 0 && agentId.length <= 64 ? agentId : null;
}
