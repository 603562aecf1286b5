// `audit verify` of the operator CLI: every ledger shard's audit chain read through the API, checked
// against that shard's signed checkpoints and its anchors read from the chain itself
// (src/audit/checkpoints-verify.ts).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { JWK } from "jose";
import { privateKeyToAddress } from "viem/accounts";
import { anchoredLogsFilter, anchorsIn, type OnChainAnchor } from "../../src/audit/anchor-abi";
import { type ListedCheckpoint, verifyCheckpoints } from "../../src/audit/checkpoints-verify";
import { rpcCall } from "../../src/chain/client";
import { RECORDED_BLOCK_MARGIN, searchLogs } from "../../src/chain/logs";
import type { AuditRow } from "../../src/ledger/chain";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { GAS_LANES, mnemonicKey } from "./chain.mjs";

type Get = <T>(path: string) => Promise<T>;

async function* remoteAuditRows(get: Get, shard: number): AsyncGenerator<AuditRow> {
  let after = 0;
  for (;;) {
    const page = await get<{ events: AuditRow[]; nextAfterSeq: number | null }>(
      `/console/audit?shard=${shard}&afterSeq=${after}&limit=1000`,
    );
    yield* page.events;
    if (page.nextAfterSeq === null) return;
    after = page.nextAfterSeq;
    process.stderr.write(`\rshard ${shard}: read through seq ${after}`);
  }
}

async function remoteCheckpoints(get: Get, shard: number): Promise<ListedCheckpoint[]> {
  const checkpoints: ListedCheckpoint[] = [];
  for (let after = 0; ; ) {
    const page = await get<{ checkpoints: ListedCheckpoint[]; nextAfterSeq: number | null }>(
      `/console/audit/checkpoints?shard=${shard}&afterSeq=${after}&limit=1000`,
    );
    checkpoints.push(...page.checkpoints);
    if (page.nextAfterSeq === null) return checkpoints;
    after = page.nextAfterSeq;
  }
}

export interface AnchorOptions {
  "rpc-url"?: string;
  anchor?: string;
  "anchor-from"?: string;
  /** Read no chain: the rows and signed checkpoints only, said so in the verdict. */
  offline?: boolean;
  /** The widest eth_getLogs range the node serves (RPC_MAX_LOG_RANGE; default 1000). */
  "max-log-range"?: string;
  /** Where the anchors are searched from (CHAIN_START_BLOCK): the anchor contract's deployment. */
  "from-block"?: string;
}

/** The default of RPC_MAX_LOG_RANGE, as the service has it. */
const DEFAULT_MAX_LOG_RANGE = 1000;

function wholeNumber(value: string | undefined, name: string, min: number, usage: (message: string) => never) {
  if (value === undefined || value === "") return null;
  if (!/^\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value)))
    usage(`${name} must be a whole number of at least ${min}, not ${value}`);
  return Number(value);
}

/**
 * Where the anchors are read: the verifier's own settings, never the service's word (a service that
 * rewrote its history could name a contract it anchored the forgery in). Without any, the local
 * chain `npm run dev` recorded in its state directory, and its gas keys' addresses.
 */
/** The local chain `npm run dev` recorded in its state directory, if there is one. */
export function recordedLocalChain(): { rpcUrl?: string; anchor?: string } {
  const stateDir = process.env.DEV_PERSIST_DIR ?? path.join(import.meta.dirname, "..", "..", ".wrangler", "state");
  const recorded = path.join(stateDir, "local-chain.json");
  return existsSync(recorded)
    ? (JSON.parse(readFileSync(recorded, "utf8")) as { rpcUrl?: string; anchor?: string })
    : {};
}

export function anchorSource(values: AnchorOptions, usage: (message: string) => never) {
  const local = recordedLocalChain();
  const rpcUrl = values["rpc-url"] ?? process.env.RPC_URL ?? local.rpcUrl;
  const anchor = values.anchor ?? process.env.AUDIT_ANCHOR_ADDRESS ?? local.anchor;
  const from = values["anchor-from"] ?? process.env.AUDIT_ANCHOR_FROM;
  const senders = from
    ? from.split(",").map((a) => a.trim())
    : (GAS_LANES as number[]).map((i) => privateKeyToAddress(mnemonicKey(i)));
  const maxLogRange =
    wholeNumber(values["max-log-range"] ?? process.env.RPC_MAX_LOG_RANGE, "--max-log-range", 1, usage) ??
    DEFAULT_MAX_LOG_RANGE;
  const fromBlock = wholeNumber(values["from-block"] ?? process.env.CHAIN_START_BLOCK, "--from-block", 0, usage);
  if (!rpcUrl || !anchor) return null;
  for (const address of [anchor, ...senders])
    if (!/^0x[0-9a-fA-F]{40}$/.test(address)) usage(`${address} is not an EVM address`);
  return {
    rpcUrl,
    anchor: anchor.toLowerCase() as `0x${string}`,
    senders: senders as `0x${string}`[],
    maxLogRange,
    fromBlock: fromBlock === null ? null : BigInt(fromBlock),
  };
}

export type AnchorSource = NonNullable<ReturnType<typeof anchorSource>>;

/**
 * Where the anchors are searched from: the verifier's own start block when given; otherwise a little
 * before the earliest block the chain itself puts any of `transactions` in (their receipts: the
 * service's word names the transactions, the chain says where they are); block 0 when none is known.
 */
export async function searchFrom(source: AnchorSource, transactions: readonly (string | null)[]): Promise<bigint> {
  if (source.fromBlock !== null) return source.fromBlock;
  let earliest: bigint | null = null;
  const hashes = transactions.filter((t): t is string => t !== null && /^0x[0-9a-fA-F]{64}$/.test(t));
  for (const hash of new Set(hashes)) {
    // A transaction the node does not know (or cannot say) bounds nothing: the others, or block 0, do.
    const receipt = await rpcCall<{ blockNumber?: string } | null>(source, "eth_getTransactionReceipt", [hash], {
      retry: true,
    }).catch(() => null);
    if (!receipt?.blockNumber) continue;
    const block = BigInt(receipt.blockNumber);
    if (earliest === null || block < earliest) earliest = block;
  }
  if (earliest === null) return 0n;
  return earliest > RECORDED_BLOCK_MARGIN ? earliest - RECORDED_BLOCK_MARGIN : 0n;
}

/**
 * The anchors of the source's contract from its senders (of one anchored `seq`, or all), read from the
 * chain from block `from` to the head in windows of at most `maxLogRange` blocks; with `seq`, up to the
 * first window that holds one of it (the first anchor is what counts). A shard k ≥ 1's checkpoint is
 * anchored as anchorSeqOf(k, seq): the shard above bit 64.
 */
export async function chainAnchors(
  source: AnchorSource,
  from: bigint,
  seq?: number | bigint,
): Promise<OnChainAnchor[]> {
  const filter = anchoredLogsFilter(source.anchor, source.senders, seq);
  try {
    const logs = await searchLogs(source, filter, from, {
      found: seq === undefined ? undefined : (part) => anchorsIn(part, source.anchor).length > 0,
    });
    return anchorsIn(logs, source.anchor);
  } catch (error) {
    throw new Error(
      `cannot read the anchors from the chain: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** One shard's chain against its own checkpoints and anchors; prints its lines, each naming the shard. */
async function verifyShard(
  get: Get,
  shard: number,
  checkpoints: ListedCheckpoint[],
  jwks: { keys: JWK[] },
  anchors: OnChainAnchor[] | null,
): Promise<boolean> {
  const name = `shard ${shard}`;
  const own = anchors?.filter((a) => (a.shard ?? 0) === shard).length ?? 0;
  process.stderr.write(`${name}: ${checkpoints.length} checkpoints, ${own} anchors; reading the rows\n`);
  const verdict = await verifyCheckpoints({ rows: remoteAuditRows(get, shard), checkpoints, jwks, anchors, shard });
  process.stderr.write("\n");
  const { chain } = verdict;
  if (chain.ok)
    console.log(`${name}: audit chain ok: ${chain.rows} rows, head seq ${chain.headSeq}, head hash ${chain.headHash}`);
  else console.log(`${name}: audit chain BROKEN at seq ${chain.brokenSeq}: ${chain.problem}`);
  if (verdict.problems.length === 0) {
    const latest = verdict.latestAnchored;
    const onChain = anchors === null ? "anchors not checked" : `${verdict.anchors} anchors on chain`;
    // Only the chain read says what is not on it yet: without it, nothing is claimed either way.
    const pending =
      anchors !== null && verdict.unanchored.length > 0
        ? `; not yet on chain: seq ${verdict.unanchored.join(", ")}`
        : "";
    console.log(
      `${name}: checkpoints ok: ${verdict.checkpoints} checkpoints, ${onChain}` +
        (latest ? `; latest anchored: seq ${latest.seq} (tx ${latest.transaction})` : "") +
        pending,
    );
  } else {
    console.log(`${name}: checkpoints FAILED: ${verdict.problems.length} problems`);
    for (const p of verdict.problems)
      console.log(`  ${name}: checkpoint seq ${p.seq} (tx ${p.transaction ?? "none"}): ${p.kind}: ${p.detail}`);
  }
  return verdict.ok;
}

/**
 * Anchors on chain of a shard the service does not list: a shard hidden from the verifier (or
 * dropped with its history) still has its anchors, which the service's own keys sent.
 */
function unlistedShards(anchors: readonly OnChainAnchor[], shards: readonly number[]): boolean {
  const strays = anchors.filter((a) => !shards.includes(a.shard ?? 0));
  if (strays.length === 0) return true;
  console.log(`anchors FAILED: ${strays.length} anchors of shards the service does not run`);
  for (const a of strays)
    console.log(
      `  shard ${a.shard ?? 0}: checkpoint seq ${a.seq} (tx ${a.transaction}): anchored on chain, but the service lists shards ${shards.join(", ")} only`,
    );
  return false;
}

/**
 * Every ledger shard the service runs, each against its own checkpoints and anchors. Prints progress on
 * standard error and the verdicts on standard output, each line naming its shard, then one line for
 * all; whether every shard holds.
 */
export async function verifyAgainstCheckpoints(
  get: Get,
  values: AnchorOptions,
  usage: (message: string) => never,
): Promise<boolean> {
  const source = anchorSource(values, usage);
  // Without the anchors, checkpoints deleted with the rows they covered go unseen: reading none is
  // asked for by name (--offline), never the quiet fallback of a missing setting.
  if (!source && !values.offline)
    usage(
      "no chain to read anchors from: give --rpc-url and --anchor (or RPC_URL and AUDIT_ANCHOR_ADDRESS), or --offline",
    );
  const { shards } = await get<{ shards: number[] }>("/console/audit/shards");
  const jwks = await get<{ keys: JWK[] }>("/.well-known/jwks.json");
  const listed = new Map<number, ListedCheckpoint[]>();
  for (const shard of shards) listed.set(shard, await remoteCheckpoints(get, shard));
  let anchors: OnChainAnchor[] | null = null;
  if (source) {
    // Each shard's first anchored checkpoint says where its anchors begin; the verifier's start block overrides.
    const firsts = [...listed.values()].map((cps) => cps.find((cp) => cp.transaction !== null)?.transaction ?? null);
    const from = await searchFrom(source, firsts);
    process.stderr.write(
      `reading anchors of ${source.anchor} from ${source.senders.join(", ")} since block ${from}, ${source.maxLogRange} blocks a request\n`,
    );
    anchors = await chainAnchors(source, from);
  } else process.stderr.write("--offline: the anchors on chain are not read\n");
  const failed: number[] = [];
  for (const shard of shards)
    if (!(await verifyShard(get, shard, listed.get(shard)!, jwks, anchors))) failed.push(shard);
  const known = anchors === null || unlistedShards(anchors, shards);
  const plural = (list: number[]) => `${list.length === 1 ? "shard" : "shards"} ${list.join(", ")}`;
  const unread = anchors === null ? " (offline: anchors on chain not checked)" : "";
  if (failed.length === 0 && known) console.log(`audit verify ok${unread}: ${plural(shards)}`);
  else console.log(`audit verify FAILED: ${failed.length > 0 ? plural(failed) : "anchors of unlisted shards"}`);
  return failed.length === 0 && known;
}
