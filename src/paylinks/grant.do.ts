import { DurableObject } from "cloudflare:workers";
import type { IdempotencySlot } from "../lib/idempotency";
import type { Env } from "../env";
import { serialQueue } from "../lib/serial";
import { drawOnGrant, type DrawRequest } from "./draw";

/**
 * One per PayLink grant (named by the grant id). Draws on the grant run here
 * one at a time, so the remaining budget and use count are never checked
 * against figures another draw is about to change.
 */
export class GrantDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();

  draw(request: DrawRequest, slot?: IdempotencySlot) {
    return this.serialize(() => drawOnGrant(this.env, request, slot));
  }
}

export const grantObjectOf = (env: Env, grantId: string) => env.GRANT.getByName(grantId);
