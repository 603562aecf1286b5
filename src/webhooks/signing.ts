import { hmacSha256Hex } from "../lib/crypto";

/**
 * `t=<unix>,v1=<hex>` over `"<t>.<raw body>"`; one `v1` per live secret, so
 * during a rotation receivers holding either the old or the new secret verify.
 */
export async function signatureHeader(secrets: string[], timestamp: number, rawBody: string): Promise<string> {
  const signatures = await Promise.all(secrets.map((secret) => hmacSha256Hex(secret, `${timestamp}.${rawBody}`)));
  return [`t=${timestamp}`, ...signatures.map((s) => `v1=${s}`)].join(",");
}
