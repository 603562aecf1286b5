import { DurableObject } from "cloudflare:workers";
import { walletOf } from "../agents/wallet.do";
import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import { HeldFigures } from "../lib/held-figures";
import { serialQueue } from "../lib/serial";
import { type DrawOutcome, type DrawRequest, drawOnGrant, GRANT_CHANGED, type GrantState } from "./draw";

/** How many times a draw is decided again after an earlier draw in flight failed under it. */
const MAX_DECISIONS = 4;

/**
 * One per PayLink grant (named by the grant id). Draws on the grant are
 * decided here one at a time, against the grant's figures kept in memory
 * (PayLinks never change after creation; only draws, all through this object,
 * move a grant's spend and uses), so the remaining budget and use count are
 * never checked against figures another draw is about to change.
 */
export class GrantDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();
  private readonly figures = new HeldFigures<GrantState>();
  private wallet: ReturnType<typeof walletOf> | null = null;

  async draw(request: DrawRequest, slot?: IdempotencySlot): Promise<DrawOutcome> {
    try {
      for (let decision = 1; ; decision++) {
        const outcome = await this.serialize((endTurn) =>
          drawOnGrant(this.env, request, { figures: this.figures, wallet: this.walletOf, endTurn }, slot),
        );
        // Decided on figures that counted an earlier draw which then did not land: decide again (it forgot them).
        if (outcome.kind !== "conflict" || outcome.reason !== GRANT_CHANGED || decision === MAX_DECISIONS)
          return outcome;
      }
    } catch (error) {
      // A stub whose object failed stays broken (every later call on it throws), so the next draw
      // gets a new one; the grant's figures already forgot a draw that failed this way.
      this.wallet = null;
      throw error;
    }
  }

  private readonly walletOf = (agentId: string) => (this.wallet ??= walletOf(this.env, agentId));
}

export const grantObjectOf = (env: Env, grantId: string) => env.GRANT.getByName(grantId);
