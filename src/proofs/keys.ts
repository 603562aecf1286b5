import { CompactSign, calculateJwkThumbprint, compactVerify, createLocalJWKSet, importJWK, type JWK } from "jose";
import type { PrivateJwk, ProofSettings, PublicJwk } from "../config/proofs";

/*
 * Signing what the service vouches for (receipts, audit checkpoints) as compact JWS, and the
 * public key set anyone checks them with offline. The `kid` is the key's own (when its JWK names
 * one) or its RFC 7638 thumbprint, so a verifier picks the right key after a rotation.
 */

// A type, not an interface: it is a plain JSON object (assignable to Record<string, unknown>).
export type PublishedJwk = {
  kty: string;
  crv: string;
  x: string;
  y?: string;
  kid: string;
  alg: "EdDSA" | "ES256";
  use: "sig";
};

const algOf = (jwk: PublicJwk) => (jwk.kty === "OKP" ? "EdDSA" : "ES256");

const publicHalf = (jwk: PublicJwk): PublicJwk =>
  jwk.kty === "OKP"
    ? { kty: "OKP", crv: jwk.crv, x: jwk.x, kid: jwk.kid }
    : { kty: "EC", crv: jwk.crv, x: jwk.x, y: jwk.y, kid: jwk.kid };

async function published(jwk: PublicJwk): Promise<PublishedJwk> {
  const half = publicHalf(jwk);
  const { kid: _kid, ...members } = half;
  const kid = jwk.kid ?? (await calculateJwkThumbprint(members as JWK));
  return { ...(members as Omit<PublishedJwk, "kid" | "alg" | "use">), kid, alg: algOf(jwk), use: "sig" };
}

/** The imported signing key and its published half, once per isolate and key. */
const signers = new Map<string, Promise<{ key: CryptoKey | Uint8Array; jwk: PublishedJwk }>>();

function signerOf(signingKey: PrivateJwk) {
  const id = `${signingKey.kty}:${signingKey.x}:${signingKey.kid ?? ""}`;
  let signer = signers.get(id);
  if (!signer) {
    signer = (async () => ({
      key: (await importJWK({ ...signingKey, kid: undefined } as JWK, algOf(signingKey))) as CryptoKey,
      jwk: await published(signingKey),
    }))();
    signer.catch(() => signers.delete(id));
    signers.set(id, signer);
  }
  return signer;
}

/** The key set at `/.well-known/jwks.json`: the signing key first, then the earlier ones. */
export async function publishedJwks(proofs: ProofSettings): Promise<{ keys: PublishedJwk[] }> {
  const current = (await signerOf(proofs.signingKey)).jwk;
  const earlier = await Promise.all(proofs.publishedKeys.map(published));
  return { keys: [current, ...earlier.filter((k) => k.kid !== current.kid)] };
}

/** The kid the signing key signs with now. */
export const signingKid = async (proofs: ProofSettings) => (await signerOf(proofs.signingKey)).jwk.kid;

/** A compact JWS of `payload` (canonical order is the caller's), `typ` naming what it is. */
export async function signJws(proofs: ProofSettings, typ: string, payload: Record<string, unknown>): Promise<string> {
  const { key, jwk } = await signerOf(proofs.signingKey);
  return new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({ alg: jwk.alg, kid: jwk.kid, typ })
    .sign(key);
}

export type JwsVerdict =
  | { ok: true; kid: string; typ: string | undefined; payload: Record<string, unknown> }
  | { ok: false; reason: string };

/** Checks a compact JWS against a published key set, offline. Never throws. */
export async function verifyJws(jws: string, jwks: { keys: JWK[] }, expectedTyp?: string): Promise<JwsVerdict> {
  try {
    const { payload, protectedHeader } = await compactVerify(jws, createLocalJWKSet(jwks), {
      algorithms: ["EdDSA", "ES256"],
    });
    if (expectedTyp !== undefined && protectedHeader.typ !== expectedTyp)
      return { ok: false, reason: `typ is ${protectedHeader.typ ?? "missing"}, expected ${expectedTyp}` };
    const body = JSON.parse(new TextDecoder().decode(payload)) as unknown;
    if (typeof body !== "object" || body === null || Array.isArray(body))
      return { ok: false, reason: "payload is not a JSON object" };
    return {
      ok: true,
      kid: protectedHeader.kid ?? "",
      typ: protectedHeader.typ,
      payload: body as Record<string, unknown>,
    };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
