import { error, INVALID, json, NOT_FOUND, type Operation } from "../lib/api-operation";
import { AuditCheckpointBody, AuditCheckpointPage, AuditPage, AuditShards, ChainVerdict } from "./responses";
import { ShardExportQuery, ShardPageQuery, ShardQuery, VerifyQuery } from "./routes";

/** The audit chain: CSV export, pages and verification. */
export const AUDIT_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/export/transactions.csv",
    operationId: "exportTransactions",
    summary: "Export the audit chain as CSV",
    description:
      "`from` and `to` are inclusive UTC days; the default is the last 30 days. Each row carries its sequence number and event hash. With more than one ledger shard, each row ends with its `shard`, and the shards' chains come merged by time (each shard's rows in its seq order); `shard` gives one shard's chain alone, which verifies by itself.",
    tag: "Export",
    auth: "console",
    query: ShardExportQuery,
    responses: {
      200: {
        description:
          "CSV: seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash (and shard, with more than one ledger shard)",
        contentType: "text/csv",
      },
      400: INVALID,
    },
  },
  {
    method: "get",
    path: "/console/audit",
    operationId: "auditPage",
    summary: "Page through the audit chain",
    tag: "Operator extras",
    auth: "console",
    query: ShardPageQuery,
    responses: { 200: json(AuditPage, "Events after `afterSeq`."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/audit/shards",
    operationId: "listAuditShards",
    summary: "The ledger shards whose audit chains to verify",
    description:
      "Each ledger shard keeps its own audit chain and checkpoints, read with `shard` on the routes of the chain and of the checkpoints. `audit verify` of the CLI walks every shard listed here (and fails an anchor on chain of a shard not listed).",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(AuditShards, "The shards, 0 first (just `[0]` with one).") },
  },
  {
    method: "get",
    path: "/console/audit/verify",
    operationId: "verifyAuditChain",
    summary: "Verify the audit chain",
    description:
      "Re-hashes the rows after the last point a verification reached (`from`; 0 is genesis), once that point's row still has the hash it had, and remembers the new head when the chain holds. `full=true` re-hashes the whole history from genesis, archived segments included. Each request re-hashes a bounded chunk of rows at most (5,000, split between the shards) and remembers how far it got, so a long history is verified over several steps: the cron carries them on every minute, and until a step reaches the chain's last row the verdict holds `progress` (`throughSeq` of `lastSeq`); a full pass under way continues the same way, from where the last `full=true` step stopped (`from`). `rows` counts from genesis either way; `checked` is how many rows were re-hashed now. The rows are also compared with the signed checkpoints stored with them (`checkpoints`: those from `from` on, every one with `full=true`): each checkpoint's JWS must verify with the published keys and sign what is stored, its head row must have the hash it signed (else the chain was rewritten), no checkpoint may lie beyond the last row (rows removed from the end), and each must start where the one before ends. When the rows hold but contradict a checkpoint, `ok` is false and `brokenSeq` is that checkpoint's seq. The checkpoints' anchors on chain are not read here (`anchorsChecked` is false, `note` says so): rows cut short or rewritten together with their checkpoints are found only by `npm run --silent cli -- audit verify`, which reads the anchors from the chain with settings of its own. With more than one ledger shard every shard's chain is verified from its own genesis against its own checkpoints: `shards` lists each shard's verdict, and the top level is the first broken shard's (else the first one's still in progress, else shard 0's).",
    tag: "Operator extras",
    auth: "console",
    query: VerifyQuery,
    responses: { 200: json(ChainVerdict, "The verdict; names the first broken row, if any."), 400: INVALID },
  },
  {
    method: "post",
    path: "/console/audit/checkpoints",
    operationId: "createAuditCheckpoint",
    summary: "Sign an audit checkpoint of the head now",
    description:
      "Signs the audit chain's head (`seq`, `hash`) and the Merkle root of the rows since the previous checkpoint as a compact JWS (`typ` `agent-pay-checkpoint+jwt`, checked with `/.well-known/jwks.json`), and records it on chain: the AuditAnchor contract's `Anchored` event carries `seq`, `hash` and `rowsRoot`. The anchor is sent within the request; `transaction` is null while it is not yet confirmed (`anchorStatus`), and the cron takes it on. The cron signs one by itself whenever the head has moved.",
    tag: "Proofs",
    auth: "console",
    query: ShardQuery,
    responses: {
      201: json(AuditCheckpointBody, "A checkpoint of the head, signed now."),
      200: json(AuditCheckpointBody, "The head has not moved since the latest checkpoint: that one."),
      400: INVALID,
      409: error("The audit chain has no rows yet: there is no head to sign.", "audit_chain_empty"),
    },
  },
  {
    method: "get",
    path: "/console/audit/checkpoints",
    operationId: "listAuditCheckpoints",
    summary: "Page through the audit checkpoints",
    description:
      "Oldest first, after `afterSeq`; what `audit verify` checks the chain and the on-chain anchors against.",
    tag: "Proofs",
    auth: "console",
    query: ShardPageQuery,
    responses: { 200: json(AuditCheckpointPage, "Checkpoints after `afterSeq`."), 400: INVALID },
  },
  {
    method: "get",
    path: "/audit/checkpoints/latest",
    operationId: "getLatestAuditCheckpoint",
    summary: "The latest audit checkpoint",
    tag: "Proofs",
    auth: "console",
    query: ShardQuery,
    responses: {
      200: json(AuditCheckpointBody, "The latest checkpoint; `transaction` is null until it is confirmed on chain."),
      400: INVALID,
      404: NOT_FOUND("checkpoint (none signed yet)", "checkpoint_not_found"),
    },
  },
];
