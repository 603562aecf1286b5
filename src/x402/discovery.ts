import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
import type { Asked, FacilitatorRequest } from "./facilitator-protocol";

/*
 * Discovery of merchants' own x402 routes (the `bazaar` extension): a route whose payment carried
 * the extension's metadata (version 2: the payload's `extensions.bazaar`; version 1: the
 * requirements' `outputSchema.input`, discoverable unless it says not) is listed once a payment for
 * it settled through the service, and its row follows each settled payment. The rows live in
 * control: the public list spans every merchant.
 */

export interface Listing {
  resource: string;
  type: string;
  x402Version: 1 | 2;
  accepts: string;
  description: string | null;
  mimeType: string | null;
  extensions: string | null;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The paid URL as listed: without query or fragment. Null for none, or one that is not an http(s) URL. */
function canonical(resource: string | null): string | null {
  if (!resource || !URL.canParse(resource)) return null;
  const url = new URL(resource);
  if (url.protocol !== "https:" && url.protocol !== "http:") return null;
  return `${url.origin}${url.pathname}`;
}

/** What a settled payment lists, or null when its route declared no discovery metadata. */
export function listingOf(request: FacilitatorRequest, asked: Asked): Listing | null {
  const resource = canonical(asked.resource);
  if (!resource) return null;
  const common = {
    resource,
    x402Version: asked.version,
    accepts: JSON.stringify([request.paymentRequirements]),
    description: asked.description,
    mimeType: asked.mimeType,
  };
  if (request.x402Version === 2) {
    const bazaar = request.paymentPayload.extensions?.bazaar;
    const input = isRecord(bazaar) && isRecord(bazaar.info) ? bazaar.info.input : null;
    if (!isRecord(input) || typeof input.type !== "string") return null;
    return { ...common, type: input.type.slice(0, 16), extensions: JSON.stringify({ bazaar }) };
  }
  const input = request.paymentRequirements.outputSchema?.input;
  if (!isRecord(input) || input.type !== "http" || typeof input.method !== "string") return null;
  if (input.discoverable === false) return null;
  return { ...common, type: "http", extensions: null };
}

/**
 * Lists (or updates) the merchant's resource after a settled payment; `paidAt` is the payment's own
 * settlement time, so a settlement answered again moves nothing.
 */
export async function recordListing(env: Env, merchantId: string, listing: Listing, paidAt: string): Promise<void> {
  await placementOf(env)
    .control.db.prepare(
      `INSERT INTO x402_resources (merchant_id, resource, type, x402_version, accepts, description, mime_type, extensions, listed_at, updated_at, last_paid_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (merchant_id, resource) DO UPDATE SET
         type = excluded.type, x402_version = excluded.x402_version, accepts = excluded.accepts,
         description = excluded.description, mime_type = excluded.mime_type, extensions = excluded.extensions,
         updated_at = excluded.updated_at, last_paid_at = MAX(last_paid_at, excluded.last_paid_at)
       WHERE excluded.last_paid_at > x402_resources.last_paid_at`,
    )
    .bind(
      merchantId,
      listing.resource,
      listing.type,
      listing.x402Version,
      listing.accepts,
      listing.description,
      listing.mimeType,
      listing.extensions,
      paidAt,
      paidAt,
      paidAt,
    )
    .run();
}

interface ResourceRow {
  merchantId: string;
  resource: string;
  type: string;
  x402Version: number;
  accepts: string;
  description: string | null;
  mimeType: string | null;
  extensions: string | null;
  listedAt: string;
  updatedAt: string;
  lastPaidAt: string;
}

const RESOURCE_SELECT = `SELECT merchant_id AS merchantId, resource, type, x402_version AS x402Version, accepts, description,
  mime_type AS mimeType, extensions, listed_at AS listedAt, updated_at AS updatedAt, last_paid_at AS lastPaidAt FROM x402_resources`;

/** Optional fields are left out rather than null: the discovery list's shape has them optional. */
const present = <T>(key: string, value: T | null) => (value === null ? {} : { [key]: value });

/** The public discovery list: every merchant's listed resources, most recently listed first. */
export async function discoveryList(env: Env, query: { limit: number; offset: number; type?: string | undefined }) {
  const db = placementOf(env).control.db;
  const where = query.type ? "WHERE type = ?" : "";
  const binds = query.type ? [query.type] : [];
  const [page, total] = await db.batch<Record<string, unknown>>([
    db
      .prepare(`${RESOURCE_SELECT} ${where} ORDER BY listed_at DESC, rowid DESC LIMIT ? OFFSET ?`)
      .bind(...binds, query.limit, query.offset),
    db.prepare(`SELECT COUNT(*) AS total FROM x402_resources ${where}`).bind(...binds),
  ]);
  const rows = page!.results as unknown as ResourceRow[];
  return {
    x402Version: 2,
    items: rows.map((r) => ({
      resource: r.resource,
      type: r.type,
      x402Version: r.x402Version,
      accepts: JSON.parse(r.accepts) as unknown[],
      lastUpdated: r.updatedAt,
      ...present("description", r.description),
      ...present("mimeType", r.mimeType),
      ...present("extensions", r.extensions === null ? null : (JSON.parse(r.extensions) as Record<string, unknown>)),
    })),
    pagination: { limit: query.limit, offset: query.offset, total: (total!.results[0] as { total: number }).total },
  };
}

/** The merchant's own listed resources, most recently paid first, with when each was listed and last paid. */
export async function merchantListings(env: Env, merchantId: string, limit: number) {
  const { results } = await placementOf(env)
    .control.db.prepare(`${RESOURCE_SELECT} WHERE merchant_id = ? ORDER BY last_paid_at DESC, rowid DESC LIMIT ?`)
    .bind(merchantId, limit)
    .all<ResourceRow>();
  return {
    resources: results.map((r) => ({
      resource: r.resource,
      type: r.type,
      x402Version: r.x402Version,
      description: r.description,
      mimeType: r.mimeType,
      accepts: JSON.parse(r.accepts) as unknown[],
      listedAt: r.listedAt,
      lastPaidAt: r.lastPaidAt,
    })),
  };
}
