import type { Context } from "hono";
import type { AnswerHome, Answers as AnswerKeeping, MoneyAct, MoneyRequest } from "../ledger/answers-place";
import type { AppEnv } from "./app-env";
import type { Actor } from "./credentials";

/*
 * Where a keyed request's answer is kept is the ledger's rule (src/ledger/answers-place.ts,
 * `answersOf`): the answer lives with the money the request moves. This reads the request for it.
 */

export type { MoneyAct };

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
