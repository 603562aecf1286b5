import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from "jose";
import type { components } from "./schema";

/**
 * Checking a receipt offline: a compact JWS the service signed (EdDSA or ES256), against its
 * published key set (`GET /.well-known/jwks.json`). Give the key set itself, or the service's
 * base URL to fetch it once (and once more if a receipt names a key it does not hold yet):
 *
 *   const check = await verifyReceipt(receipt, { baseUrl: "https://pay.example" });
 *   if (check.ok && check.payload.type === "charge") console.log(check.payload.auditSeq);
 */

type Schemas = components["schemas"];
export type ChargeReceipt = Schemas["ChargeReceiptPayload"];
export type PayoutReceipt = Schemas["PayoutReceiptPayload"];
export type RefundReceipt = Schemas["RefundReceiptPayload"];
export type ReceiptPayload = ChargeReceipt | PayoutReceipt | RefundReceipt;

/** The JWS `typ` every receipt carries. */
export const RECEIPT_TYP = "agent-pay-receipt+jwt";

export type ReceiptVerdict = { ok: true; kid: string; payload: ReceiptPayload } | { ok: false; reason: string };

export type ReceiptKeys = { jwks: JSONWebKeySet } | { baseUrl: string; fetch?: typeof fetch };

const fetched = new Map<string, Promise<JSONWebKeySet>>();

async function fetchJwks(baseUrl: string, fetcher: typeof fetch): Promise<JSONWebKeySet> {
  const res = await fetcher(`${baseUrl.replace(/\/+$/, "")}/.well-known/jwks.json`);
  if (!res.ok) throw new Error(`the key set answered ${res.status}`);
  return (await res.json()) as JSONWebKeySet;
}

function keySet(baseUrl: string, fetcher: typeof fetch, fresh: boolean): Promise<JSONWebKeySet> {
  let keys = fresh ? undefined : fetched.get(baseUrl);
  if (!keys) {
    keys = fetchJwks(baseUrl, fetcher);
    keys.catch(() => fetched.delete(baseUrl));
    fetched.set(baseUrl, keys);
  }
  return keys;
}

async function check(receipt: string, jwks: JSONWebKeySet): Promise<ReceiptVerdict> {
  try {
    const { payload, protectedHeader } = await compactVerify(receipt, createLocalJWKSet(jwks), {
      algorithms: ["EdDSA", "ES256"],
    });
    if (protectedHeader.typ !== RECEIPT_TYP) return { ok: false, reason: `not a receipt (typ ${protectedHeader.typ})` };
    const body = JSON.parse(new TextDecoder().decode(payload)) as { type?: unknown } | null;
    if (!body || !["charge", "payout", "refund"].includes(body.type as string))
      return { ok: false, reason: "not a receipt payload" };
    return { ok: true, kid: protectedHeader.kid ?? "", payload: body as ReceiptPayload };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

const unknownKey = (verdict: ReceiptVerdict) => !verdict.ok && verdict.reason.startsWith("no applicable key");

/** Checks a receipt's signature and kind; never throws. */
export async function verifyReceipt(receipt: string, keys: ReceiptKeys): Promise<ReceiptVerdict> {
  if ("jwks" in keys) return check(receipt, keys.jwks);
  const fetcher = keys.fetch ?? fetch;
  try {
    const first = await check(receipt, await keySet(keys.baseUrl, fetcher, false));
    // A key newer than the copy held (a rotation since): fetch the set once more.
    return unknownKey(first) ? await check(receipt, await keySet(keys.baseUrl, fetcher, true)) : first;
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
