import { decodeUtf8 } from "../../lib/strict-json";
import { PaymentRequired } from "./request";

/** Headers and body of a version 2 PAYMENT-REQUIRED stay far below this (bytes of base64). */
const MAX_HEADER_LENGTH = 64 * 1024;

/** Base64 (standard or URL-safe, padded or not) of UTF-8 JSON, parsed; undefined when it is not that. */
function base64Json(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed.length > MAX_HEADER_LENGTH || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return undefined;
  try {
    const normalized = trimmed.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
    const binary = atob(normalized + "===".slice((normalized.length + 3) % 4));
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const text = decodeUtf8(bytes);
    return text === null ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The x402 terms of a 402 answer, as an agent hands them to POST /agent/x402/payments: the version 2
 * `PAYMENT-REQUIRED` header (base64 JSON) when it holds version 2 terms, else a version 1 body
 * `{ x402Version: 1, accepts }`, as the official clients read them (version 2 first). Null when the
 * answer is not a 402 or carries neither: it is then not a paywall the service pays.
 */
export function paymentRequiredOf(status: number, headers: Headers, body: string): PaymentRequired | null {
  if (status !== 402) return null;
  const header = headers.get("payment-required");
  if (header !== null) {
    const v2 = PaymentRequired.safeParse(base64Json(header));
    if (v2.success && v2.data.x402Version === 2) return v2.data;
  }
  const v1 = PaymentRequired.safeParse(parsedJson(body));
  return v1.success && v1.data.x402Version === 1 ? v1.data : null;
}
