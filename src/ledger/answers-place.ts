import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import { earlierAnswerUnderKey, payerHeldBy } from "./answers-earlier";
import { type Place, type Placement, placementOf } from "./place";

/*
 * Where the answer of a keyed request acting on money lives: with the money, in the batch that
 * moves it (or makes the object that will), so no crash can separate the two. The idempotency
 * middleware (src/auth/idempotency.ts) asks here for every keyed request its route declares to act
 * on money; every other keyed request keeps its answer in control.
 */

/**
 * What a keyed request does with money, as its route declares it:
 * - `"writes"`: it writes rows of an owner's ledger (moves money, or makes a charge, a link, a
 *   payout, a refund) and stores its answer in that batch;
 * - `"pays"`: as `"writes"`, for a payment from an agent's wallet that may travel to another shard
 *   and that a retry cannot find again by what it names (a draw makes a new charge, a checkout
 *   payment too, a grant finds its approval granted): a retry after a lost answer is answered
 *   with the payment sent under its key.
 */
export type MoneyAct = "writes" | "pays";

/** A keyed request acting on money, as far as where its answer lives goes: who acts, and whom it names. */
export interface MoneyRequest {
  act: MoneyAct;
  actor: { kind: "agent"; agentId: string } | { kind: "merchant"; merchantId: string } | { kind: "console" };
  /** The agent the path names (`:agentId`). */
  pathAgentId?: string | undefined;
  /** The object the path names by its id (`:id`, `:chargeId`). */
  pathId?: string | undefined;
  /** The agent the body names (`agentId`), or null for none usable; read only for a merchant's payment. */
  bodyAgentId?: (() => string | null) | undefined;
}

/** Where a keyed request's key is reserved and its answer stored, and what a retry after a lost answer gets there. */
export interface AnswerHome {
  db: D1Database;
  /** The 200 body of the payment an earlier request under the key made, or null (see earlierAnswerUnderKey). */
  earlier(slot: IdempotencySlot): Promise<Record<string, unknown> | null>;
}

/** Where keyed requests keep their answers in this deployment. */
export interface Answers {
  /** Control: where every key is claimed when there are several shards, and where the rest keep their answers. */
  control: D1Database;
  sharded: boolean;
  /** The home of a keyed request acting on money. */
  homeOf(request: MoneyRequest): Promise<AnswerHome>;
}

/** Whose money a request moves: where it lives, and the agent paying or the object holding its payment. */
interface Owner {
  at: Place;
  agentId?: string;
  heldBy?: string;
}

/**
 * The one rule. The money a request moves lives with an owner: the agent the path names, the agent
 * a merchant's payment draws on (its body names it), or the acting agent; else the object the
 * path's id names lives where its id says; else the acting merchant's home. An owner the directory
 * does not know, an id of a shard this deployment does not run, or a request naming none of
 * these: control (such a request finds nothing and answers 404 or 400 from there).
 */
async function ownerOf(place: Placement, request: MoneyRequest): Promise<Owner> {
  const agentId = agentNamed(request);
  if (agentId !== undefined) {
    const at = agentId === null ? null : await place.ofKnown("agent", agentId);
    return at && agentId !== null ? { at, agentId } : { at: place.control };
  }
  if (request.pathId !== undefined) return { at: place.ofId(request.pathId) ?? place.control, heldBy: request.pathId };
  if (request.actor.kind === "merchant")
    return { at: (await place.ofKnown("merchant", request.actor.merchantId)) ?? place.control };
  return { at: place.control };
}

/** The agent whose money moves, as the request names it; undefined when it names none, null when its body names none usable. */
function agentNamed({ act, actor, pathAgentId, bodyAgentId }: MoneyRequest): string | null | undefined {
  if (pathAgentId !== undefined) return pathAgentId;
  if (actor.kind === "merchant" && act === "pays") return bodyAgentId?.() ?? null;
  if (actor.kind === "agent") return actor.agentId;
  return undefined;
}

/**
 * The agent whose earlier payment under the key a retry looks for: only a payment (`"pays"`) looks,
 * and only with several shards (with one, no transfer exists to outlive its answer); the agent
 * paying, or the one whose payment the path's object holds (an approval's). Null: nothing to look for.
 */
async function payerToFind(place: Placement, request: MoneyRequest, owner: Owner): Promise<string | null> {
  if (request.act !== "pays" || !place.sharded) return null;
  return owner.agentId ?? (owner.heldBy !== undefined ? payerHeldBy(owner.at, owner.heldBy) : null);
}

/**
 * Where keyed requests keep their answers: the rule above over this deployment's placement.
 */
export function answersOf(env: Env): Answers {
  const place = placementOf(env);
  return {
    control: place.control.db,
    sharded: place.sharded,
    async homeOf(request) {
      const owner = await ownerOf(place, request);
      return {
        db: owner.at.db,
        async earlier(slot) {
          const payer = await payerToFind(place, request, owner);
          return payer === null ? null : earlierAnswerUnderKey(env, owner.at, payer, slot);
        },
      };
    },
  };
}
