import { and, desc, eq, isNull, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { merchants, webhookAttempts, webhookDeliveries, webhookEndpoints } from "../db/schema";
import { CONTROL_IDS, newId, newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";
import { decryptSecret, encryptSecret } from "../lib/encryption";
import { nothingMore, writeTogether, type WithCreated } from "../db/statements";

export type EndpointRow = typeof webhookEndpoints.$inferSelect;
export type DeliveryRow = typeof webhookDeliveries.$inferSelect;

/** The list shape (docs/api.md, Webhooks): never a secret. */
export const endpointView = (e: EndpointRow) => ({
  id: e.id,
  url: e.url,
  events: JSON.parse(e.events) as string[],
  merchantId: e.merchantId,
  createdAt: e.createdAt,
});

export const deliveryView = (d: DeliveryRow) => ({
  id: d.id,
  eventId: d.eventId,
  type: d.type,
  status: d.status,
  attempts: d.attempts,
  lastStatusCode: d.lastStatusCode,
  lastError: d.lastError,
  nextAttemptAt: d.nextAttemptAt,
  createdAt: d.createdAt,
  deliveredAt: d.deliveredAt,
});

/**
 * Whether the merchant an endpoint is scoped to exists. Read here rather than through merchants/: the
 * outbox is written by the ledger, which the merchants' key rolls commit through, so webhooks sits below both.
 */
export const merchantExists = async (db: Db, merchantId: string) =>
  Boolean(await db.select({ id: merchants.id }).from(merchants).where(eq(merchants.id, merchantId)).get());

/** Registers an endpoint; its `whsec_` secret is returned here once and stored encrypted. */
export async function createEndpoint(
  db: Db,
  secretsKey: string,
  input: { url: string; events: string[]; merchantId: string | null; createdBy: string },
  withCreated: WithCreated<{ row: EndpointRow; secret: string }> = nothingMore,
) {
  const secret = newSecret("webhookSecret");
  const row: EndpointRow = {
    id: newId("webhookEndpoint", CONTROL_IDS),
    url: input.url,
    events: JSON.stringify(input.events),
    merchantId: input.merchantId,
    secretCiphertext: await encryptSecret(secretsKey, secret),
    previousSecretCiphertext: null,
    previousSecretExpiresAt: null,
    createdBy: input.createdBy,
    createdAt: nowIso(),
    disabledAt: null,
    deletedAt: null,
  };
  const created = { row, secret };
  await writeTogether(db, [db.insert(webhookEndpoints).values(row), ...(await withCreated(created))]);
  return created;
}

export const listEndpoints = (db: Db) =>
  db
    .select()
    .from(webhookEndpoints)
    .where(isNull(webhookEndpoints.disabledAt))
    .orderBy(desc(webhookEndpoints.createdAt), desc(sql`rowid`))
    .limit(500)
    .all();

/** An active endpoint: one that receives deliveries. */
export const getEndpoint = (db: Db, id: string) =>
  db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.disabledAt)))
    .get();

/** An endpoint whose deliveries stay readable: active or disabled by the service; not one removed with DELETE. */
export const getUndeletedEndpoint = (db: Db, id: string) =>
  db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.deletedAt)))
    .get();

/**
 * DELETE: the endpoint leaves fan-out, the list and the deliveries API; its
 * rows are kept. One the service disabled can be removed too (it keeps the
 * time it was disabled).
 */
export async function disableEndpoint(db: Db, id: string): Promise<boolean> {
  const at = nowIso();
  const result = await db
    .update(webhookEndpoints)
    .set({ disabledAt: sql`COALESCE(${webhookEndpoints.disabledAt}, ${at})`, deletedAt: at })
    .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.deletedAt)))
    .run();
  return result.meta.changes > 0;
}

/**
 * Issues a new secret. The old one keeps signing beside it (a second `v1=`)
 * for `graceSeconds`, so receivers can switch without dropping an event.
 */
export async function rotateEndpointSecret(
  db: Db,
  secretsKey: string,
  endpoint: EndpointRow,
  graceSeconds: number,
  withCreated: WithCreated<{ secret: string; previousSecretExpiresAt: string | null }> = nothingMore,
  now = Date.now(),
) {
  const rotated = {
    secret: newSecret("webhookSecret"),
    previousSecretExpiresAt: graceSeconds > 0 ? nowIso(now + graceSeconds * 1000) : null,
  };
  const update = db
    .update(webhookEndpoints)
    .set({
      secretCiphertext: await encryptSecret(secretsKey, rotated.secret),
      previousSecretCiphertext: graceSeconds > 0 ? endpoint.secretCiphertext : null,
      previousSecretExpiresAt: rotated.previousSecretExpiresAt,
    })
    .where(eq(webhookEndpoints.id, endpoint.id));
  await writeTogether(db, [update, ...(await withCreated(rotated))]);
  return rotated;
}

/** The secrets that sign right now: the current one, and the previous one during its grace period. */
export async function signingSecrets(secretsKey: string, endpoint: EndpointRow, now = Date.now()): Promise<string[]> {
  const secrets = [await decryptSecret(secretsKey, endpoint.secretCiphertext)];
  if (
    endpoint.previousSecretCiphertext &&
    endpoint.previousSecretExpiresAt &&
    endpoint.previousSecretExpiresAt > nowIso(now)
  ) {
    secrets.push(await decryptSecret(secretsKey, endpoint.previousSecretCiphertext));
  }
  return secrets;
}

export const listDeliveries = (db: Db, endpointId: string, limit: number) =>
  db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.endpointId, endpointId))
    .orderBy(desc(webhookDeliveries.createdAt), desc(sql`rowid`))
    .limit(limit)
    .all();

export const listAttempts = (db: Db, deliveryId: string) =>
  db
    .select()
    .from(webhookAttempts)
    .where(eq(webhookAttempts.deliveryId, deliveryId))
    .orderBy(webhookAttempts.attempt)
    .all();
