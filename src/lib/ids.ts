/** Every identifier prefix the service issues, in one closed map. */
export const ID_PREFIXES = {
  merchant: "mch_",
  charge: "chg_",
  checkoutLink: "cl_",
  /** The public path identifier of a checkout link, apart from its id. */
  checkoutToken: "ct_",
  paylink: "pl_",
  /** The public path identifier of a PayLink, apart from its id. */
  paylinkCode: "plc_",
  grant: "plg_",
  approval: "apr_",
  agent: "agent_",
  webhookEndpoint: "wh_",
  webhookEvent: "evt_wh_",
  payment: "PAY_",
  x402Payment: "xpay_",
  /** An agent's payment of an x402 paywall (outbound). */
  agentX402Payment: "xpo_",
  deposit: "dep_",
  payout: "po_",
  refund: "re_",
  outboundTransfer: "otx_",
  credit: "CRD_",
  merchantKey: "sk_mch_",
  agentKey: "svc_sk_",
  webhookSecret: "whsec_",
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"; // Crockford base32: no I, L, O, U

/** Where a new object lives: a ledger place (src/ledger/place.ts); control's ids carry no tag. */
export interface IdPlace {
  readonly shard: number;
}

/** The ids of objects that live in the control database: merchants, agents, webhook endpoints and events. */
export const CONTROL_IDS: IdPlace = { shard: 0 };

/**
 * Random, URL-safe, 120 bits of entropy (24 base32 characters). An object that lives in ledger
 * shard k ≥ 1 carries it after the prefix (`chg_s1_…`, `PAY_S1…`), so a route that has only an id
 * finds the object's database without reading the shard directory; shard 0's ids are untagged.
 */
export function newId(kind: IdKind, at: IdPlace): string {
  const { shard } = at;
  const bytes = crypto.getRandomValues(new Uint8Array(15));
  let out = "";
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(buffer >> bits) & 31];
    }
  }
  const prefix = ID_PREFIXES[kind];
  const upper = kind === "payment" || kind === "credit";
  const tag = shard === 0 ? "" : `${upper ? "S" : "s"}${shard}_`;
  // Object ids read better in lower case; payment references keep the spec's upper-case style.
  return prefix + tag + (upper ? out : out.toLowerCase());
}

/** A secret credential: prefix + 32 random bytes as base64url (43 characters). */
export function newSecret(kind: "merchantKey" | "agentKey" | "webhookSecret"): string {
  return ID_PREFIXES[kind] + base64url(crypto.getRandomValues(new Uint8Array(32)));
}

export function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function base64urlDecode(text: string): Uint8Array {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  const binary = atob(padded);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}
