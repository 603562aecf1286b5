import { z } from "zod";
import { named, Timestamp, Cents } from "../lib/api-shapes";

/** Response bodies: The audit chain. */

const Hash = z.string().regex(/^[0-9a-f]{64}$/);

export const AuditEvent = named(
  "AuditEvent",
  z.strictObject({
    seq: z.number().int().positive(),
    type: z.string(),
    reference: z.string().nullable(),
    chargeId: z.string().nullable(),
    agentId: z.string().nullable(),
    merchantId: z.string().nullable(),
    amountMinor: z.number().int(),
    currency: z.string(),
    data: z.record(z.string(), z.unknown()),
    createdAt: Timestamp,
    prevHash: Hash,
    hash: Hash,
  }),
);

export const AuditPage = named(
  "AuditPage",
  z.strictObject({ events: z.array(AuditEvent), nextAfterSeq: z.number().int().positive().nullable() }),
);

export const ChainVerdict = named(
  "ChainVerdict",
  z.union([
    z.strictObject({ ok: z.literal(true), rows: Cents, headSeq: Cents, headHash: Hash }),
    z.strictObject({
      ok: z.literal(false),
      rows: Cents,
      brokenSeq: z.number().int(),
      problem: z.enum(["seq_gap", "prev_hash_mismatch", "hash_mismatch"]),
    }),
  ]),
);
