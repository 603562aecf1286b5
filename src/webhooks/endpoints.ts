import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { merchants, type webhookAttempts, type webhookDeliveries, type webhookEndpoints } from "../db/schema";
import { CONTROL_IDS, newId, newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";
import { decryptSecret, encryptSecret } from "../lib/encryption";
import { executeBatch, nothingMore, sqlStatement, type WithCreated } from "../db/statements";

export type EndpointRow = typeof webhookEndpoints.$inferSelect;
export type DeliveryRow = typeof webhookDeliveries.$inferSelect;
export type AttemptRow = typeof webhookAttempts.$inferSelect;

/** An endpoint's columns named as in EndpointRow. */
const ENDPOINT_ROW = `SELECT id, url, events, merchant_id AS merchantId, secret_ciphertext AS secretCiphertext,
  previous_secret_ciphertext AS previousSecretCiphertext, previous_secret_expires_at AS previousSecretExpiresAt,
  created_by AS createdBy, created_at AS createdAt, disabled_at AS disabledAt, deleted_at AS deletedAt
  FROM webhook_endpoints`;

/** A delivery's columns named as in DeliveryRow. */
const DELIVERY_ROW = `SELECT id, event_id AS eventId, endpoint_id AS endpointId, type, status, attempts,
  last_status_code AS lastStatusCode, last_error AS lastError, next_attempt_at AS nextAttemptAt,
  created_at AS createdAt, delivered_at AS deliveredAt FROM webhook_deliveries`;

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
  db: D1Database,
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
  const insert = sqlStatement(
    `INSERT INTO webhook_endpoints (id, url, events, merchant_id, secret_ciphertext, previous_secret_ciphertext,
       previous_secret_expires_at, created_by, created_at, disabled_at, deleted_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    row.id,
    row.url,
    row.events,
    row.merchantId,
    row.secretCiphertext,
    row.previousSecretCiphertext,
    row.previousSecretExpiresAt,
    row.createdBy,
    row.createdAt,
    row.disabledAt,
    row.deletedAt,
  );
  await executeBatch(db, [insert, ...(await withCreated(created))]);
  return created;
}

export const listEndpoints = async (db: D1Database) =>
  (
    await db
      .prepare(`${ENDPOINT_ROW} WHERE disabled_at IS NULL ORDER BY created_at DESC, rowid DESC LIMIT 500`)
      .all<EndpointRow>()
  ).results;

/** An active endpoint: one that receives deliveries. */
export const getEndpoint = (db: D1Database, id: string) =>
  db.prepare(`${ENDPOINT_ROW} WHERE id = ? AND disabled_at IS NULL`).bind(id).first<EndpointRow>();

/** An endpoint whose deliveries stay readable: active or disabled by the service; not one removed with DELETE. */
export const getUndeletedEndpoint = (db: D1Database, id: string) =>
  db.prepare(`${ENDPOINT_ROW} WHERE id = ? AND deleted_at IS NULL`).bind(id).first<EndpointRow>();

/**
 * DELETE: the endpoint leaves fan-out, the list and the deliveries API; its
 * rows are kept. One the service disabled can be removed too (it keeps the
 * time it was disabled).
 */
export async function disableEndpoint(db: D1Database, id: string): Promise<boolean> {
  const at = nowIso();
  const result = await db
    .prepare(
      "UPDATE webhook_endpoints SET disabled_at = COALESCE(disabled_at, ?), deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
    )
    .bind(at, at, id)
    .run();
  return result.meta.changes > 0;
}

/**
 * Issues a new secret. The old one keeps signing beside it (a second `v1=`)
 * for `graceSeconds`, so receivers can switch without dropping an event.
 */
export async function rotateEndpointSecret(
  db: D1Database,
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
  const update = sqlStatement(
    "UPDATE webhook_endpoints SET secret_ciphertext = ?, previous_secret_ciphertext = ?, previous_secret_expires_at = ? WHERE id = ?",
    await encryptSecret(secretsKey, rotated.secret),
    graceSeconds > 0 ? endpoint.secretCiphertext : null,
    rotated.previousSecretExpiresAt,
    endpoint.id,
  );
  await executeBatch(db, [update, ...(await withCreated(rotated))]);
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

export const listDeliveries = async (db: D1Database, endpointId: string, limit: number) =>
  (
    await db
      .prepare(`${DELIVERY_ROW} WHERE endpoint_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`)
      .bind(endpointId, limit)
      .all<DeliveryRow>()
  ).results;

export const listAttempts = async (db: D1Database, deliveryId: string) =>
  (
    await db
      .prepare(
        `SELECT id, delivery_id AS deliveryId, attempt, status_code AS statusCode, error, duration_ms AS durationMs,
           created_at AS createdAt FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt`,
      )
      .bind(deliveryId)
      .all<AttemptRow>()
  ).results;
