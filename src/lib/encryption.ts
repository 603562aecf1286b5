import { base64url, base64urlDecode } from "./ids";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const keyCache = new Map<string, Promise<CryptoKey>>();

/** AES-256-GCM key derived (SHA-256) from the WEBHOOK_SECRETS_KEY setting. */
function aesKey(material: string): Promise<CryptoKey> {
  let key = keyCache.get(material);
  if (!key) {
    key = crypto.subtle
      .digest("SHA-256", encoder.encode(material))
      .then((raw) => crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]));
    keyCache.set(material, key);
  }
  return key;
}

/**
 * Encryption at rest for what must be read back (webhook signing secrets,
 * which must sign; stored idempotent responses, which may carry a key shown
 * once), under the WEBHOOK_SECRETS_KEY setting: a database dump alone
 * reveals none of them. API keys are never read back, so they are hashed instead.
 */
export async function encryptSecret(material: string, secret: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ciphertext = new Uint8Array(
    await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await aesKey(material), encoder.encode(secret)),
  );
  const packed = new Uint8Array(iv.length + ciphertext.length);
  packed.set(iv);
  packed.set(ciphertext, iv.length);
  return `v1:${base64url(packed)}`;
}

export async function decryptSecret(material: string, stored: string): Promise<string> {
  if (!stored.startsWith("v1:")) throw new Error("unknown secret encoding");
  const packed = base64urlDecode(stored.slice(3));
  const plaintext = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: packed.slice(0, 12) },
    await aesKey(material),
    packed.slice(12),
  );
  return decoder.decode(plaintext);
}
