import { SELF } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import type { ProofSettings } from "../../src/config/proofs";
import { publishedJwks, signingKid, signJws, verifyJws } from "../../src/proofs/keys";
import { TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";

// The signing keys of receipts and checkpoints: what one signs, the published set verifies offline;
// after a rotation the earlier key's signatures still verify, and nothing else does.
const proofs = () => settingsOf(env).proofs;

describe("proof signing keys", () => {
  it("signs a compact JWS with the current key's kid, and the published set verifies it", async () => {
    const jws = await signJws(proofs(), "test+jws", { a: 1, b: "two" });
    const [header] = jws.split(".");
    expect(JSON.parse(atob(header!.replace(/-/g, "+").replace(/_/g, "/")))).toEqual({
      alg: "EdDSA",
      kid: "test-only-receipts-1",
      typ: "test+jws",
    });
    const jwks = await publishedJwks(proofs());
    expect(jwks.keys.map((k) => k.kid)).toEqual(["test-only-receipts-1", "test-only-receipts-0"]);
    for (const key of jwks.keys) {
      expect(key).not.toHaveProperty("d");
      expect(key).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig" });
    }
    expect(await verifyJws(jws, jwks, "test+jws")).toEqual({
      ok: true,
      kid: "test-only-receipts-1",
      typ: "test+jws",
      payload: { a: 1, b: "two" },
    });
  });

  it("refuses a changed payload, a wrong typ, and a key that is not published", async () => {
    const jwks = await publishedJwks(proofs());
    const jws = await signJws(proofs(), "test+jws", { amountMinor: 100 });
    const [h, , s] = jws.split(".");
    const forged = `${h}.${btoa(JSON.stringify({ amountMinor: 1 })).replace(/=+$/, "")}.${s}`;
    expect((await verifyJws(forged, jwks)).ok).toBe(false);
    expect(await verifyJws(jws, jwks, "other+jws")).toMatchObject({ ok: false });
    const stranger: ProofSettings = {
      signingKey: { kty: "OKP", crv: "Ed25519", x: TEST_RECEIPT_KEYS[0].x, d: TEST_RECEIPT_KEYS[0].d, kid: "stranger" },
      publishedKeys: [],
    };
    expect((await verifyJws(await signJws(stranger, "test+jws", {}), jwks)).ok).toBe(false);
  });

  it("after a rotation, what the earlier key signed still verifies against the published set", async () => {
    const before: ProofSettings = { signingKey: { ...TEST_RECEIPT_KEYS[0] }, publishedKeys: [] };
    const old = await signJws(before, "test+jws", { n: 1 });
    expect(await verifyJws(old, await publishedJwks(proofs()))).toMatchObject({
      ok: true,
      kid: "test-only-receipts-0",
    });
  });

  it("names a key without a kid by its RFC 7638 thumbprint", async () => {
    const { kid: _kid, ...unnamed } = TEST_RECEIPT_KEYS[0];
    const kid = await signingKid({ signingKey: unnamed, publishedKeys: [] });
    expect(kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe("GET /.well-known/jwks.json", () => {
  it("publishes the public keys, signing key first, with no private part", async () => {
    const res = await SELF.fetch("https://agent-pay.test/.well-known/jwks.json");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { keys: Record<string, unknown>[] };
    expect(body).toEqual(await publishedJwks(proofs()));
    expect(body.keys.map((k) => k.kid)).toEqual(["test-only-receipts-1", "test-only-receipts-0"]);
    expect(JSON.stringify(body)).not.toContain(TEST_RECEIPT_KEYS[1].d);
  });
});
