import type { PayOutcome } from "../agents/outcomes";
import { walletOf } from "../agents/wallet.do";
import { newPendingCharge } from "../charges/service";
import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import type { checkoutLinks } from "../db/schema";
import { executeBatch, guard, nothingMore, sqlStatement, type WithCreated } from "../db/statements";
import { linkActiveCheck } from "../ledger/movements";
import { type Place, placementOf } from "../ledger/place";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import { merchantLabelOf, merchantNameOf } from "../merchants/statements";

export type CheckoutLinkRow = typeof checkoutLinks.$inferSelect;

const checkoutUrl = (token: string) => `/checkout/${token}`;

/** A link's columns named as in CheckoutLinkRow, `active` as stored (SQLite's 0 or 1: `linkRowOf` reads it). */
const LINK_COLUMNS = `id, token, merchant_id AS merchantId, amount_minor AS amountMinor, currency, description,
  external_id AS externalId, visits, payments_count AS paymentsCount, total_paid_minor AS totalPaidMinor, active,
  created_at AS createdAt`;
type StoredLink = Omit<CheckoutLinkRow, "active"> & { active: number };
const linkRowOf = (l: StoredLink): CheckoutLinkRow => ({ ...l, active: l.active === 1 });

/** The creation response. */
export const checkoutLinkCreatedView = (l: CheckoutLinkRow) => ({
  checkoutLinkId: l.id,
  checkoutToken: l.token,
  checkoutUrl: checkoutUrl(l.token),
  amountMinor: l.amountMinor,
  currency: l.currency,
  description: l.description,
  visits: l.visits,
  paymentsCount: l.paymentsCount,
  totalPaidMinor: l.totalPaidMinor,
});

/** The merchant list entry (also the PATCH response). */
export const checkoutLinkMerchantView = (l: CheckoutLinkRow) => ({
  ...checkoutLinkCreatedView(l),
  active: l.active,
  createdAt: l.createdAt,
});

/** The public view: what a paying agent sees, of an active link (a disabled one is 409). */
export const checkoutLinkPublicView = (l: CheckoutLinkRow, merchantName: string) => ({
  checkoutLinkId: l.id,
  amountMinor: l.amountMinor,
  currency: l.currency,
  description: l.description,
  merchantName,
  active: l.active,
  status: "active" as const,
  visits: l.visits,
  paymentsCount: l.paymentsCount,
  totalPaidMinor: l.totalPaidMinor,
});

/** A new checkout link of the merchant, in `home`, the merchant's home (its id and token name it). */
export async function createCheckoutLink(
  home: Place,
  merchantId: string,
  input: { amountMinor: number; description: string; externalId?: string | undefined },
  withCreated: WithCreated<CheckoutLinkRow> = nothingMore,
) {
  // With its merchant, the token naming its place as the id does.
  const row: CheckoutLinkRow = {
    id: newId("checkoutLink", home),
    token: newId("checkoutToken", home),
    merchantId,
    amountMinor: input.amountMinor,
    currency: "USD",
    description: input.description,
    externalId: input.externalId ?? null,
    visits: 0,
    paymentsCount: 0,
    totalPaidMinor: 0,
    active: true,
    createdAt: nowIso(),
  };
  const insert = sqlStatement(
    `INSERT INTO checkout_links (id, token, merchant_id, amount_minor, currency, description, external_id, visits,
       payments_count, total_paid_minor, active, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    row.id,
    row.token,
    row.merchantId,
    row.amountMinor,
    row.currency,
    row.description,
    row.externalId,
    row.visits,
    row.paymentsCount,
    row.totalPaidMinor,
    row.active ? 1 : 0,
    row.createdAt,
  );
  await executeBatch(home.db, [insert, ...(await withCreated(row))]);
  return row;
}

export async function listCheckoutLinks(d1: D1Database, merchantId: string, limit: number) {
  const [links, total] = await executeBatch(d1, [
    sqlStatement(
      `SELECT ${LINK_COLUMNS} FROM checkout_links WHERE merchant_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`,
      merchantId,
      limit,
    ),
    sqlStatement("SELECT COUNT(*) AS total FROM checkout_links WHERE merchant_id = ?", merchantId),
  ]);
  return {
    links: (links!.results as StoredLink[]).map(linkRowOf),
    total: (total!.results[0] as { total: number } | undefined)?.total ?? 0,
  };
}

/** Enables or disables the merchant's own link; undefined when the token is not theirs. */
export async function setCheckoutLinkActive(d1: D1Database, merchantId: string, token: string, active: boolean) {
  const row = await d1
    .prepare(`UPDATE checkout_links SET active = ? WHERE token = ? AND merchant_id = ? RETURNING ${LINK_COLUMNS}`)
    .bind(active ? 1 : 0, token, merchantId)
    .first<StoredLink>();
  return row ? linkRowOf(row) : undefined;
}

/**
 * The database of the place a checkout link's token (or id) names: its merchant's home. A token naming
 * a shard this deployment does not run names no link: it is looked for in control, where no token
 * naming a shard is, and not found (a 404, never a missing binding's 500).
 */
export const dbOfCheckoutLink = (env: Env, tokenOrId: string): D1Database => {
  const place = placementOf(env);
  return (place.ofId(tokenOrId) ?? place.control).db;
};

/** The link with its merchant's name for the public view; `count` (a GET, not a HEAD) counts the visit. */
export async function visitCheckoutLink(d1: D1Database, token: string, count = true) {
  const read = sqlStatement(
    `SELECT ${LINK_COLUMNS}, ${merchantNameOf("checkout_links.merchant_id")} AS merchantName FROM checkout_links WHERE token = ?`,
    token,
  );
  const visit = sqlStatement("UPDATE checkout_links SET visits = visits + 1 WHERE token = ?", token);
  // The visit and the read in one batch: the link as the visit left it.
  const results = await executeBatch(d1, count ? [visit, read] : [read]);
  const row = results.at(-1)?.results[0] as (StoredLink & { merchantName: string | null }) | undefined;
  if (!row) return undefined;
  const { merchantName, ...link } = row;
  return { link: linkRowOf(link), merchantName: merchantName ?? "" };
}

/** The link and what a payment needs of its merchant. */
export async function checkoutLinkForPayment(d1: D1Database, token: string) {
  const row = await d1
    .prepare(
      `SELECT ${LINK_COLUMNS}, ${merchantLabelOf("checkout_links.merchant_id")} FROM checkout_links WHERE token = ?`,
    )
    .bind(token)
    .first<StoredLink & { merchantName: string; merchantCategory: string | null }>();
  if (!row) return undefined;
  const { merchantName, merchantCategory, ...link } = row;
  return { link: linkRowOf(link), merchantName, merchantCategory };
}

/**
 * What a wallet payment of a link needs, in one statement (it runs for every payment), its merchant's
 * name and category from merchants' own columns.
 */
const LINK_TO_PAY = `SELECT id, merchant_id AS merchantId, amount_minor AS amountMinor, description,
    external_id AS externalId, active, ${merchantLabelOf("checkout_links.merchant_id")}
  FROM checkout_links WHERE token = ?`;
type LinkToPay = Pick<CheckoutLinkRow, "id" | "merchantId" | "amountMinor" | "description" | "externalId"> & {
  /** SQLite's boolean: 0 or 1. */
  active: number;
  merchantName: string;
  merchantCategory: string | null;
};

/** The agent paying a checkout link sees its charge, not the merchant's balance. */
export const CHECKOUT_PAID_VIEW = { kind: "checkout" } as const;

/**
 * Active links by token, per isolate, as a payment reads them: nothing of that changes but `active`
 * (links are never edited otherwise, nor merchants' names and categories), and every payment's own
 * batch guards that the link is still active. So a link paid over and over is read once a minute,
 * not once a payment; one found disabled by its guard is forgotten at once.
 */
const payableLinks = new Map<string, { link: LinkToPay; until: number }>();
const PAYABLE_LINK_MS = 60_000;
const PAYABLE_LINKS_KEPT = 1_000;

async function linkToPay(home: Place, token: string, now: number): Promise<{ link: LinkToPay | null; kept: boolean }> {
  const kept = payableLinks.get(token);
  if (kept && kept.until > now) return { link: kept.link, kept: true };
  return { link: await readLinkToPay(home, token, now), kept: false };
}

async function readLinkToPay(home: Place, token: string, now: number): Promise<LinkToPay | null> {
  const link = (await home.db.prepare(LINK_TO_PAY).bind(token).first<LinkToPay>()) ?? null;
  payableLinks.delete(token);
  if (link?.active) {
    // The oldest entry goes first (a Map keeps insertion order).
    if (payableLinks.size >= PAYABLE_LINKS_KEPT) payableLinks.delete(payableLinks.keys().next().value!);
    payableLinks.set(token, { link, until: now + PAYABLE_LINK_MS });
  }
  return link;
}

/**
 * Pays a checkout link from the agent's wallet, under its policy. Each payment
 * materializes its own charge against the link, created in the batch that pays
 * it (or holds it for approval), with the link still active as a guard.
 */
export async function payCheckoutLink(
  env: Env,
  agentId: string,
  token: string,
  slot?: IdempotencySlot,
): Promise<PayOutcome> {
  // The link lives in its merchant's home, which its token names (null: a shard not run here, no link).
  const home = placementOf(env).ofId(token);
  const { link, kept } = home ? await linkToPay(home, token, Date.now()) : { link: null, kept: false };
  if (!home || !link) return { kind: "not_found", reason: "checkout_link_not_found" };
  if (!link.active) return { kind: "conflict", reason: "checkout_link_disabled" };
  const charge = {
    // Born in the link's place (its merchant's home), with an id naming it.
    ...newPendingCharge(
      home,
      link.merchantId,
      {
        amountMinor: link.amountMinor,
        description: link.description,
        externalId: link.externalId,
        checkoutLinkId: link.id,
      },
      nowIso(),
    ),
    merchantName: link.merchantName,
    merchantCategory: link.merchantCategory,
  };
  const linkStillActive = guard(...linkActiveCheck(link.id));
  const outcome = await walletOf(env, agentId).payNewCharge(
    agentId,
    { charge, birthGuards: [linkStillActive], view: CHECKOUT_PAID_VIEW },
    slot,
  );
  if (outcome.kind === "conflict" && outcome.reason === "checkout_link_disabled") payableLinks.delete(token);
  // A disabled link is refused before anything about the agent: a refusal made with a kept copy is
  // checked against the link as it is now (a payment or a hold was guarded by its batch already).
  if (kept && outcome.kind !== "paid" && outcome.kind !== "approval" && outcome.kind !== "conflict") {
    const current = await readLinkToPay(home, token, Date.now());
    if (!current) return { kind: "not_found", reason: "checkout_link_not_found" };
    if (!current.active) return { kind: "conflict", reason: "checkout_link_disabled" };
  }
  return outcome;
}
