import { z } from "zod";
import { BaseUnits, Cents, named, Timestamp } from "../lib/api-shapes";

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
    amountMinor: z
      .number()
      .int()
      .nullable()
      .describe("The amount in cents; null when it is not a whole number of them (`amountBaseUnits` states it)."),
    amountBaseUnits: BaseUnits.optional().describe(
      "The exact amount in the token's base units; absent on rows written before amounts below a cent existed, whose hash does not cover it.",
    ),
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

const CheckpointProblemKind = z.enum(["signature_invalid", "checkpoint_contradicts_rows", "checkpoint_missing"]);

/** The stored checkpoints a verification compared with the rows (src/audit/stored-checkpoints.ts). */
const CheckpointsChecked = z
  .strictObject({
    checked: Cents.describe(
      "Checkpoints compared with the rows now: those from `from` on, every one with `full=true`.",
    ),
    failed: Cents.describe("How many of them the rows contradict, or whose signature does not hold."),
    latestSeq: z.number().int().positive().nullable().describe("The latest checkpoint stored; null before the first."),
    problems: z
      .array(z.strictObject({ kind: CheckpointProblemKind, seq: z.number().int().positive(), detail: z.string() }))
      .describe("The first ten problems, by checkpoint seq."),
  })
  .describe("The signed checkpoints stored with the rows, checked with the service's published keys.");

/**
 * Where a verification started re-hashing (src/audit/verification.ts), the checkpoints it compared, and
 * that the anchors on chain are not among what it checked; `rows` counts from genesis either way.
 */
const VerificationStart = {
  full: z.boolean(),
  from: Cents,
  checked: Cents,
  checkpoints: CheckpointsChecked,
  anchorsChecked: z
    .literal(false)
    .describe("Always false: the anchors on chain are checked by `npm run --silent cli -- audit verify` alone."),
  note: z.string().describe("What this verification checks and what it leaves to `audit verify` of the CLI."),
};

/** A step that stopped before the chain's end: how far it got, and the end it has yet to reach. */
const Progress = z
  .strictObject({
    throughSeq: Cents.describe("The last row verified: the rows hold from genesis through it (`headSeq`)."),
    lastSeq: Cents.describe("The chain's last row when this step read it."),
  })
  .optional()
  .describe(
    "Present only when this step stopped before the chain's end: each step re-hashes a bounded chunk of rows and remembers how far it got, and the next steps (the cron's, or the next requests) continue from there. Absent when the verification reached the last row.",
  );
const Holds = {
  ok: z.literal(true),
  rows: Cents,
  headSeq: Cents,
  headHash: Hash,
  progress: Progress,
  ...VerificationStart,
};
const Broken = {
  ok: z.literal(false),
  rows: Cents,
  brokenSeq: z
    .number()
    .int()
    .describe("The first broken row, or, when the rows hold, the first stored checkpoint they contradict."),
  problem: z.enum(["seq_gap", "prev_hash_mismatch", "hash_mismatch", ...CheckpointProblemKind.options]),
  ...VerificationStart,
};
/** The shard a verdict is of, by its number. */
const shard = z.number().int().min(0);
/** With more than one ledger shard: each shard's verdict (the top level is the first broken one's, else shard 0's). */
const Shards = z.array(z.union([z.strictObject({ shard, ...Holds }), z.strictObject({ shard, ...Broken })])).optional();

export const ChainVerdict = named(
  "ChainVerdict",
  z.union([z.strictObject({ ...Holds, shards: Shards }), z.strictObject({ ...Broken, shards: Shards })]),
);

export const AuditShards = named(
  "AuditShards",
  z.strictObject({
    shards: z
      .array(z.number().int().min(0))
      .describe("The ledger shards this deployment runs, 0 first; each has its own audit chain and checkpoints."),
  }),
);

const Hex32 = z.string().regex(/^0x[0-9a-f]{64}$/);
const Address = z.string().regex(/^0x[0-9a-f]{40}$/);

export const AuditCheckpoint = named(
  "AuditCheckpoint",
  z.strictObject({
    seq: z.number().int().positive(),
    hash: Hash,
    fromSeq: z.number().int().positive(),
    rowsRoot: Hash,
    signedAt: Timestamp,
    jws: z.string(),
    kid: z.string(),
    anchorStatus: z.enum(["pending", "sent", "confirmed", "failed"]),
    transaction: Hex32.nullable(),
    blockNumber: z.number().int().nonnegative().nullable(),
    anchoredBy: Address.nullable(),
    anchoredAt: Timestamp.nullable(),
  }),
);

export const AuditCheckpointBody = named("AuditCheckpointBody", z.strictObject({ checkpoint: AuditCheckpoint }));

export const AuditCheckpointPage = named(
  "AuditCheckpointPage",
  z.strictObject({
    checkpoints: z.array(AuditCheckpoint),
    nextAfterSeq: z.number().int().positive().nullable(),
  }),
);
