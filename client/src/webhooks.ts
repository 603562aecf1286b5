/**
 * Verifying our webhooks on the receiving side. Self-contained (WebCrypto
 * only) so a receiver can copy or import it:
 *
 *   const raw = await request.text();            // the exact bytes, before any JSON parsing
 *   const check = await verifyWebhook({ secret: "whsec_...", header: request.headers.get("X-Service-Signature"), rawBody: raw });
 *   if (!check.ok) return new Response(check.reason, { status: 401 });
 *   const event = JSON.parse(raw);               // dedupe by event.id
 */
export type VerifyResult =
  | { ok: true; timestamp: number }
  | {
      ok: false;
      reason: "missing_header" | "malformed_header" | "timestamp_out_of_tolerance" | "no_matching_signature";
    };

const encoder = new TextEncoder();

async function hmacHex(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Equal-length comparison whose time does not depend on where the strings differ. */
function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Checks `X-Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]` against the raw
 * body: HMAC-SHA256 with the endpoint secret over `<t>.<raw body>`, any `v1`
 * matching (during a secret rotation two are sent), and `t` within
 * `toleranceSeconds` (default 300) of now.
 */
export async function verifyWebhook(input: {
  secret: string;
  header: string | null | undefined;
  rawBody: string;
  toleranceSeconds?: number;
  now?: number;
}): Promise<VerifyResult> {
  if (!input.header) return { ok: false, reason: "missing_header" };
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of input.header.split(",")) {
    const at = part.indexOf("=");
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === "t" && /^\d+$/.test(value)) timestamp = Number(value);
    else if (key === "v1" && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (timestamp === null || signatures.length === 0) return { ok: false, reason: "malformed_header" };
  const nowSeconds = Math.floor((input.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - timestamp) > (input.toleranceSeconds ?? 300))
    return { ok: false, reason: "timestamp_out_of_tolerance" };
  const expected = await hmacHex(input.secret, `${timestamp}.${input.rawBody}`);
  let matched = false;
  for (const signature of signatures) matched = constantTimeEqual(signature, expected) || matched;
  return matched ? { ok: true, timestamp } : { ok: false, reason: "no_matching_signature" };
}
