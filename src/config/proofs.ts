import { z } from "zod";

// The key that signs receipts and audit checkpoints (a private JWK, Ed25519 or P-256), and the
// earlier keys' public halves, still published so what they signed can be checked after a rotation.

const base64url = z.string().regex(/^[A-Za-z0-9_-]+$/, "must be base64url");
const kid = z.string().min(1).max(128).optional();

const ed25519 = z.object({ kty: z.literal("OKP"), crv: z.literal("Ed25519"), x: base64url, kid });
const p256 = z.object({ kty: z.literal("EC"), crv: z.literal("P-256"), x: base64url, y: base64url, kid });
const publicJwk = z.discriminatedUnion("kty", [ed25519, p256]);
const privateJwk = z.discriminatedUnion("kty", [ed25519.extend({ d: base64url }), p256.extend({ d: base64url })]);

export type PublicJwk = z.output<typeof publicJwk>;
export type PrivateJwk = z.output<typeof privateJwk>;

/** A JSON setting read through a schema; JSON.parse's own message is never echoed, since it quotes the secret. */
const json = <T extends z.ZodType>(schema: T, what: string) =>
  z.string().transform((text, ctx): z.output<T> => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      ctx.addIssue({ code: "custom", message: `must be ${what} as JSON` });
      return z.NEVER;
    }
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    ctx.addIssue({ code: "custom", message: `must be ${what}: ${parsed.error.issues[0]?.message ?? "invalid"}` });
    return z.NEVER;
  });

export const proofsShape = {
  RECEIPT_SIGNING_KEY: json(privateJwk, "a private JWK (OKP Ed25519 or EC P-256, with d)"),
  RECEIPT_PUBLISHED_KEYS: json(
    z.array(
      z
        .record(z.string(), z.unknown())
        .refine((k) => !("d" in k), "one holds a private key (d)")
        .pipe(publicJwk),
    ),
    "an array of public JWKs",
  ).optional(),
};

/** Key ids that mark a development or test key: refused in production. */
export const NON_PRODUCTION_KID = /^(dev|test)-only/;

export interface ProofSettings {
  signingKey: PrivateJwk;
  /** Earlier keys, published for verification only. */
  publishedKeys: PublicJwk[];
}

type Parsed = z.output<z.ZodObject<typeof proofsShape>>;

export const proofSettings = (s: Parsed): { proofs: ProofSettings } => ({
  proofs: { signingKey: s.RECEIPT_SIGNING_KEY, publishedKeys: s.RECEIPT_PUBLISHED_KEYS ?? [] },
});
