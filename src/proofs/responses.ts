import { z } from "zod";
import { named } from "../lib/api-shapes";

/** Response bodies: the keys receipts and audit checkpoints are checked with. */

export const PublishedKey = named(
  "PublishedKey",
  z.strictObject({
    kty: z.enum(["OKP", "EC"]),
    crv: z.enum(["Ed25519", "P-256"]),
    x: z.string(),
    y: z.string().optional(),
    kid: z.string(),
    alg: z.enum(["EdDSA", "ES256"]),
    use: z.literal("sig"),
  }),
);

export const PublishedKeySet = named("PublishedKeySet", z.strictObject({ keys: z.array(PublishedKey) }));
