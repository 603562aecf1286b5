import type { Settings } from "../config/env";
import { keyHolderByHash } from "../db/api-keys";
import { sha256Hex, timingSafeEqualStrings } from "../lib/crypto";
import { ID_PREFIXES } from "../lib/ids";
import { IsolateCache } from "../lib/isolate-cache";
import { isConsoleUser, isRevokedSession } from "./console-users";
import { verifyConsoleToken } from "./jwt";

export type ActorKind = "merchant" | "agent" | "console";

export type Actor =
  | { kind: "merchant"; merchantId: string }
  | { kind: "agent"; agentId: string }
  | { kind: "console"; email: string; jti?: string; expiresAt?: string };

/** The credential kind a bearer token claims to be, by its prefix. */
export function credentialKindOf(token: string): ActorKind {
  if (token.startsWith(ID_PREFIXES.merchantKey)) return "merchant";
  if (token.startsWith(ID_PREFIXES.agentKey)) return "agent";
  return "console";
}

/** Only the SHA-256 of an API key is stored; lookups go by that hash. */
export const hashApiKey = (key: string) => sha256Hex(key);

const KEY_SHAPE = /^(sk_mch_|svc_sk_)[A-Za-z0-9_-]{43}$/;

/** Resolves a bearer token to the actor it identifies, or null when it is not valid. */
export async function resolveCredential(control: D1Database, settings: Settings, token: string): Promise<Actor | null> {
  const kind = credentialKindOf(token);
  if (kind === "console") {
    const session = await verifyConsoleToken(settings.consoleSessionSecret, token);
    if (!session || !(await isConsoleUser(control, settings, session.email))) return null;
    if (await isRevokedSession(control, session.jti)) return null;
    return { kind: "console", email: session.email, jti: session.jti, expiresAt: session.expiresAt };
  }
  if (!KEY_SHAPE.test(token)) return null;
  const hash = await hashApiKey(token);
  const now = Date.now();
  const known = knownKeys.get(hash, now);
  if (known) return known;
  const found = await lookUpKey(control, kind, hash, now);
  if (!found) return null;
  knownKeys.set(hash, found.actor, now, found.until - now);
  return found.actor;
}

/**
 * The holder of a key: its current key, or the one before it while its grace lasts (`until`, the
 * end of that grace). Compared in constant time, as a hash equal to the one looked up.
 */
async function lookUpKey(
  control: D1Database,
  kind: "merchant" | "agent",
  hash: string,
  now: number,
): Promise<{ actor: Actor; until: number } | null> {
  const row = await keyHolderByHash(control, kind, hash);
  if (!row) return null;
  const actor: Actor =
    kind === "merchant" ? { kind: "merchant", merchantId: row.id } : { kind: "agent", agentId: row.id };
  if (await timingSafeEqualStrings(row.hash, hash)) return { actor, until: Number.POSITIVE_INFINITY };
  const until = row.previousUntil ? Date.parse(row.previousUntil) : 0;
  if (row.previousHash && until > now && (await timingSafeEqualStrings(row.previousHash, hash)))
    return { actor, until };
  return null;
}

/**
 * Keys that resolved, by the hash of the key (never the key), for a few
 * seconds per isolate: a payment in a tight loop then costs one D1 read per
 * key every KEY_MEMORY_MS (3 s), not one per request. A key can be rolled (its
 * predecessor ending at once, or after a grace), so this memory is what bounds
 * how long an ended key still works in an isolate that saw it: under the 5 s
 * the service promises. A key in its grace is remembered no longer than the
 * grace lasts. Unknown keys are never remembered, so a new key works at once.
 */
export const KEY_MEMORY_MS = 3_000;
const knownKeys = new IsolateCache<string, Actor>(10_000, KEY_MEMORY_MS);
