import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { agents, consoleRevokedSessions, consoleUsers, merchants } from "../db/schema";
import type { Settings } from "../env";
import { sha256Hex, timingSafeEqualStrings } from "../lib/crypto";
import { ID_PREFIXES } from "../lib/ids";
import { verifyConsoleToken } from "./jwt";
import { IsolateCache } from "../lib/isolate-cache";

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
export async function resolveCredential(db: Db, settings: Settings, token: string): Promise<Actor | null> {
  const kind = credentialKindOf(token);
  if (kind === "console") {
    const session = await verifyConsoleToken(settings.consoleSessionSecret, token);
    if (!session || !(await isConsoleUser(db, settings, session.email))) return null;
    const revoked = await db.select({ jti: consoleRevokedSessions.jti }).from(consoleRevokedSessions).where(eq(consoleRevokedSessions.jti, session.jti)).get();
    if (revoked) return null;
    return { kind: "console", email: session.email, jti: session.jti, expiresAt: session.expiresAt };
  }
  if (!KEY_SHAPE.test(token)) return null;
  const hash = await hashApiKey(token);
  const known = knownKeys.get(hash);
  if (known) return known;
  const actor = await lookUpKey(db, kind, hash);
  if (actor) knownKeys.set(hash, actor);
  return actor;
}

async function lookUpKey(db: Db, kind: "merchant" | "agent", hash: string): Promise<Actor | null> {
  if (kind === "merchant") {
    const row = await db.select({ id: merchants.id, hash: merchants.apiKeyHash }).from(merchants).where(eq(merchants.apiKeyHash, hash)).get();
    return row && (await timingSafeEqualStrings(row.hash, hash)) ? { kind: "merchant", merchantId: row.id } : null;
  }
  const row = await db.select({ id: agents.id, hash: agents.apiKeyHash }).from(agents).where(eq(agents.apiKeyHash, hash)).get();
  return row && (await timingSafeEqualStrings(row.hash, hash)) ? { kind: "agent", agentId: row.id } : null;
}

/**
 * Keys that resolved, by the hash of the key (never the key), for a minute per
 * isolate: a payment in a tight loop then costs no D1 read to authenticate.
 * Safe because a key's actor never changes (keys are neither rotated nor
 * revoked, and merchants and agents are never deleted); if revocation is ever
 * added, it must clear this or the TTL bounds how long a revoked key works.
 * Unknown keys are never remembered, so a new key works at once.
 */
const knownKeys = new IsolateCache<string, Actor>(10_000, 60_000);

/** A console user is in CONSOLE_USERS or was added from the console. */
export async function isConsoleUser(db: Db, settings: Settings, email: string): Promise<boolean> {
  const normalized = email.trim().toLowerCase();
  if (settings.consoleUsers.includes(normalized)) return true;
  const row = await db.select({ email: consoleUsers.email }).from(consoleUsers).where(eq(consoleUsers.email, normalized)).get();
  return row !== undefined;
}
