import { walletOf } from "../agents/wallet.do";
import type { Env } from "../config/env";
import type { paylinkGrants, paylinks } from "../db/schema";
import { executeBatch, nothingMore, type SqlStatement, sqlStatement, type WithCreated } from "../db/statements";
import { AGENT_FROZEN } from "../ledger/movements";
import { outboxEventWhen } from "../ledger/outbox";
import { type Place, placementOf } from "../ledger/place";
import type { ErrorCode } from "../lib/error-codes";
import { ApiError } from "../lib/errors";
import { newId } from "../lib/ids";
import { IsolateCache } from "../lib/isolate-cache";
import { nowIso } from "../lib/time";
import { merchantLabelOf } from "../merchants/statements";

export type PaylinkRow = typeof paylinks.$inferSelect;
export type GrantRow = typeof paylinkGrants.$inferSelect;

/** A PayLink's columns named as in PaylinkRow. */
const PAYLINK_COLUMNS = `id, code, merchant_id AS merchantId, label, budget_minor AS budgetMinor,
  per_charge_minor AS perChargeMinor, max_uses AS maxUses, expires_at AS expiresAt, created_at AS createdAt`;

const HOUR_MS = 3600_000;

export const isExpired = (p: { expiresAt: string | null }, now = Date.now()) =>
  p.expiresAt !== null && p.expiresAt <= nowIso(now);

/** How much of a budget is used: one grant's figures, or a PayLink's summed over its grants. */
export interface Usage {
  uses: number;
  spentMinor: number;
}

/** The PayLink as the public sees it (`GET /pl/:code`, and inside an accept response). */
export const paylinkPublicView = (p: PaylinkRow, business: string | null, usage: Usage, now = Date.now()) => ({
  paylinkId: p.id,
  code: p.code,
  business,
  label: p.label,
  budgetMinor: p.budgetMinor,
  perChargeMinor: p.perChargeMinor,
  maxUses: p.maxUses,
  uses: usage.uses,
  remainingMinor: Math.max(0, p.budgetMinor - usage.spentMinor),
  expiresAt: p.expiresAt,
  status: isExpired(p, now) ? "expired" : "active",
});

/** The creation response: the public view with `acceptUrl`, and `business` null. */
export const paylinkCreatedView = (p: PaylinkRow) => ({
  ...paylinkPublicView(p, null, { uses: 0, spentMinor: 0 }),
  acceptUrl: `/pl/${p.code}/accept`,
});

/** A new PayLink of the merchant, in `home`, the merchant's home (its id and code name it). */
export async function createPaylink(
  home: Place,
  merchantId: string,
  input: {
    budgetMinor: number;
    label?: string | undefined;
    perChargeMinor?: number | undefined;
    maxUses?: number | undefined;
    expiresInHours?: number | undefined;
  },
  withCreated: WithCreated<PaylinkRow> = nothingMore,
) {
  const now = Date.now();
  // With its merchant, the code naming its place as the id does.
  const row: PaylinkRow = {
    id: newId("paylink", home),
    code: newId("paylinkCode", home),
    merchantId,
    label: input.label ?? null,
    budgetMinor: input.budgetMinor,
    perChargeMinor: input.perChargeMinor ?? null,
    maxUses: input.maxUses ?? null,
    expiresAt: input.expiresInHours === undefined ? null : nowIso(now + input.expiresInHours * HOUR_MS),
    createdAt: nowIso(now),
  };
  const insert = sqlStatement(
    `INSERT INTO paylinks (id, code, merchant_id, label, budget_minor, per_charge_minor, max_uses, expires_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    row.id,
    row.code,
    row.merchantId,
    row.label,
    row.budgetMinor,
    row.perChargeMinor,
    row.maxUses,
    row.expiresAt,
    row.createdAt,
  );
  await executeBatch(home.db, [insert, ...(await withCreated(row))]);
  return row;
}

/**
 * The database of the place a PayLink's code (or id, or a grant's id) names: its merchant's home. A code
 * naming a shard this deployment does not run names no PayLink: it is looked for in control, where no
 * code naming a shard is, and not found (a 404, never a missing binding's 500).
 */
export const dbOfPaylink = (env: Env, codeOrId: string): D1Database => {
  const place = placementOf(env);
  return (place.ofId(codeOrId) ?? place.control).db;
};

/** The PayLink by code, with its merchant's name and category. */
export async function paylinkByCode(d1: D1Database, code: string) {
  const row = await d1
    .prepare(`SELECT ${PAYLINK_COLUMNS}, ${merchantLabelOf("paylinks.merchant_id")} FROM paylinks WHERE code = ?`)
    .bind(code)
    .first<PaylinkRow & { merchantName: string; merchantCategory: string | null }>();
  if (!row) return undefined;
  const { merchantName, merchantCategory, ...paylink } = row;
  return { paylink, merchantName, merchantCategory };
}

/** Draws and spend summed over every grant of a PayLink. */
export async function paylinkUsage(d1: D1Database, paylinkId: string): Promise<Usage> {
  const row = await d1
    .prepare(
      "SELECT COALESCE(SUM(uses), 0) AS uses, COALESCE(SUM(spent_minor), 0) AS spentMinor FROM paylink_grants WHERE paylink_id = ?",
    )
    .bind(paylinkId)
    .first<Usage>();
  return { uses: Number(row?.uses ?? 0), spentMinor: Number(row?.spentMinor ?? 0) };
}

/**
 * What a draw needs to find its grant: the PayLink's id and merchant by code,
 * and the grant's id by (PayLink, agent). Neither ever changes once it exists
 * (PayLinks are immutable, a grant is never deleted), so each isolate
 * remembers them and a merchant drawing in a loop reads no D1 to route a draw.
 * A miss is never remembered: a new PayLink or grant is found at once.
 */
const knownPaylinks = new IsolateCache<string, { id: string; merchantId: string }>(10_000);
const knownGrants = new IsolateCache<string, string>(50_000);

export async function drawTargetOf(env: Env, code: string, agentId: string) {
  const home = placementOf(env).ofId(code);
  if (!home) return { kind: "paylink_not_found" as const };
  const { db } = home;
  let paylink = knownPaylinks.get(code);
  if (!paylink) {
    const found = await paylinkByCode(db, code);
    if (!found) return { kind: "paylink_not_found" as const };
    paylink = { id: found.paylink.id, merchantId: found.paylink.merchantId };
    knownPaylinks.set(code, paylink);
  }
  const grantKey = `${paylink.id}:${agentId}`;
  let grantId = knownGrants.get(grantKey);
  if (!grantId) {
    grantId = (await grantOfAgent(db, paylink.id, agentId))?.id;
    if (grantId) knownGrants.set(grantKey, grantId);
  }
  return { kind: "found" as const, merchantId: paylink.merchantId, grantId };
}

export const grantOfAgent = async (d1: D1Database, paylinkId: string, agentId: string) =>
  (await d1
    .prepare(
      `SELECT id, paylink_id AS paylinkId, agent_id AS agentId, merchant_id AS merchantId, spent_minor AS spentMinor, uses,
       budget_minor AS budgetMinor, created_at AS createdAt FROM paylink_grants WHERE paylink_id = ? AND agent_id = ?`,
    )
    .bind(paylinkId, agentId)
    .first<GrantRow>()) ?? undefined;

/**
 * The statements that accept a PayLink for an agent, idempotently: the first
 * batch creates the grant and its `paylink.accepted` event; a later one finds
 * the same grant and fires nothing.
 */
function acceptStatements(home: Place, paylink: PaylinkRow, agentId: string): SqlStatement[] {
  // The grant lives with its PayLink, in the merchant's home: its draws guard and move its figures in
  // the batch that pays the merchant (the arrival, across shards), and a PayLink's usage sums its grants.
  const grantId = newId("grant", home);
  const createdAt = nowIso();
  return [
    sqlStatement(
      `INSERT INTO paylink_grants (id, paylink_id, agent_id, merchant_id, spent_minor, uses, budget_minor, created_at)
       VALUES (?, ?, ?, ?, 0, 0, ?, ?) ON CONFLICT (paylink_id, agent_id) DO NOTHING`,
      grantId,
      paylink.id,
      agentId,
      paylink.merchantId,
      paylink.budgetMinor,
      createdAt,
    ),
    outboxEventWhen(
      "paylink.accepted",
      paylink.merchantId,
      { grantId, paylinkId: paylink.id, agentId },
      createdAt,
      "EXISTS (SELECT 1 FROM paylink_grants WHERE id = ?)",
      grantId,
    ),
  ];
}

/** A refused accept, as the route and the MCP tool both answer it. */
export const acceptRefusal = (o: Exclude<AcceptOutcome, { kind: "accepted" }>) =>
  new ApiError(o.kind === "not_found" ? 404 : o.kind === "frozen" ? 403 : 409, o.reason);

export type AcceptOutcome =
  | { kind: "accepted"; grantId: string; paylink: ReturnType<typeof paylinkPublicView> }
  | { kind: "not_found" | "conflict" | "frozen"; reason: ErrorCode };

/**
 * The agent accepts a PayLink by its code: idempotent per (PayLink, agent), so
 * accepting again returns the same grant, which outlives the link's expiry;
 * an expired link cannot be newly accepted.
 */
export async function acceptPaylinkByCode(env: Env, code: string, agentId: string): Promise<AcceptOutcome> {
  const home = placementOf(env).ofId(code);
  if (!home) return { kind: "not_found", reason: "paylink_not_found" };
  const { db } = home;
  const found = await paylinkByCode(db, code);
  if (!found) return { kind: "not_found", reason: "paylink_not_found" };
  const existing = await grantOfAgent(db, found.paylink.id, agentId);
  const expired = !existing && isExpired(found.paylink);
  // A frozen agent is refused first, whether or not it has a grant or the link expired. The agent's
  // wallet object knows whether it is frozen, and writes a new grant in the same turn.
  const written = await walletOf(env, agentId).writeUnlessFrozen(
    agentId,
    existing || expired ? [] : acceptStatements(home, found.paylink, agentId),
    // The wallet object writes where the PayLink's code says it lives.
    code,
  );
  if (written === "frozen") return { kind: "frozen", reason: AGENT_FROZEN };
  if (expired) return { kind: "conflict", reason: "paylink_expired" };
  const grant = existing ?? (await grantOfAgent(db, found.paylink.id, agentId));
  if (!grant) throw new Error("grant missing right after its insert");
  return { kind: "accepted", grantId: grant.id, paylink: paylinkPublicView(found.paylink, found.merchantName, grant) };
}
