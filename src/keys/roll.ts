import { z } from "zod";
import { hashApiKey } from "../auth/credentials";
import type { Env } from "../config/env";
import { type KeyHolderKind, keyRollChecks, keyRollUpdate } from "../db/api-keys";
import { guards, type SqlStatement } from "../db/statements";
import { placementOf } from "../ledger/place";
import type { CommitPlan } from "../ledger/plan";
import { newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";

/** Whose key is rolled: an agent's (`svc_sk_`) or a merchant's (`sk_mch_`). */
export interface KeyHolder {
  kind: KeyHolderKind;
  id: string;
}

export interface RolledKey {
  apiKey: string;
  previousKeyExpiresAt: string;
}

/** A key roll: how long the key it replaces keeps working (0 ends it at once; at most 7 days). */
export const RollKeyBody = z.object({ graceSeconds: z.number().int().min(0).max(604_800).default(86_400) }).strict();

/**
 * A new key becomes the holder's key and the one it replaces keeps working
 * until the end of its grace (now, for a grace of 0). Only the two newest keys
 * are kept, so rolling again ends the older one's grace at once. One ledger
 * batch with its audit row; `answer` is what must commit beside it (the stored
 * answer of an Idempotency-Key). Null for an unknown holder.
 */
export async function rollKey(
  env: Env,
  holder: KeyHolder,
  graceSeconds: number,
  by: string,
  answer: (rolled: RolledKey) => Promise<SqlStatement[]>,
): Promise<RolledKey | null> {
  const apiKey = newSecret(holder.kind === "agent" ? "agentKey" : "merchantKey");
  const now = Date.now();
  const rolled = { apiKey, previousKeyExpiresAt: nowIso(now + graceSeconds * 1000) };
  const plan = keyRollPlan(
    holder,
    await hashApiKey(apiKey),
    graceSeconds,
    rolled.previousKeyExpiresAt,
    by,
    nowIso(now),
    await answer(rolled),
  );
  const result = await placementOf(env).control.commit(plan);
  if (result.kind === "committed") return rolled;
  // This very roll landed in a batch whose answer was lost, and the sequencer applied it again: it is done once.
  if (result.reason === "key_already_rolled") return rolled;
  if (result.reason === `${holder.kind}_not_found`) return null;
  throw new Error(`key roll refused: ${result.reason}`);
}

function keyRollPlan(
  holder: KeyHolder,
  hash: string,
  graceSeconds: number,
  previousKeyExpiresAt: string,
  by: string,
  at: string,
  epilogue: SqlStatement[],
): CommitPlan {
  return {
    statements: [
      guards(...keyRollChecks(holder.kind, holder.id, hash)),
      keyRollUpdate(holder.kind, holder.id, hash, previousKeyExpiresAt),
      ...epilogue,
    ],
    audit: [
      {
        type: `${holder.kind}.key_rolled`,
        reference: null,
        chargeId: null,
        agentId: holder.kind === "agent" ? holder.id : null,
        merchantId: holder.kind === "merchant" ? holder.id : null,
        amountMinor: 0,
        currency: "USD",
        data: { by, graceSeconds, previousKeyExpiresAt },
        createdAt: at,
      },
    ],
  };
}
