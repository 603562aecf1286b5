// `evidence verify FILE` of the CLI: a charge's evidence file (GET /merchant/charges/:chargeId/evidence)
// checked by src/receipts/evidence-verify.ts with keys and a chain the verifier chooses, never the
// file's word: the key set from --keys, the anchors read from the verifier's own chain settings, for
// the shard and seq the checkpoint signed (a shard k ≥ 1 anchors its seq with k above bit 64).
import { readFileSync } from "node:fs";
import type { JWK } from "jose";
import { anchorSeqOf } from "../../src/audit/anchor-abi";
import { type AnchorsRead, verifyEvidence } from "../../src/receipts/evidence-verify";
import { type AnchorOptions, anchorSource, chainAnchors, searchFrom } from "./audit-verify";

export interface EvidenceOptions extends AnchorOptions {
  /** The key set to trust: the service's `/.well-known/jwks.json` (a URL), or a copy of it (a file). */
  keys?: string;
  /** Don't read the chain: the anchor is reported `skipped`. */
  offline?: boolean;
}

const readJson = (file: string, what: string): unknown => {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new Error(`cannot read ${what} ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
};

async function trustedKeys(from: string): Promise<{ keys: JWK[] }> {
  let set: unknown;
  if (!/^https?:\/\//.test(from)) set = readJson(from, "the key set");
  else {
    const response = await fetch(from).catch(() => null);
    if (!response?.ok) throw new Error(`cannot fetch the keys at ${from}`);
    set = await response.json().catch(() => null);
  }
  // A JWK set: `{ keys: [ { kid, ... }, ... ] }`. Anything else is said as such, not met later as a TypeError.
  const keys = (set as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === "object" && k !== null && typeof k.kid === "string"))
    throw new Error(`${from} is not a JWK set ({ "keys": [ { "kid": ..., ... } ] })`);
  return { keys: keys as JWK[] };
}

async function chainIdAt(rpcUrl: string): Promise<number> {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
  }).catch(() => null);
  const body = (await response?.json().catch(() => null)) as { result?: string } | null;
  if (!body?.result) throw new Error(`cannot reach the chain at ${rpcUrl}`);
  return Number(body.result);
}

/** Prints each check and the verdict on standard output; whether the evidence holds. */
export async function verifyEvidenceFile(
  file: string,
  options: EvidenceOptions,
  usage: (message: string) => never,
): Promise<boolean> {
  if (!options.keys)
    usage(
      "evidence verify needs --keys <service>/.well-known/jwks.json (or a saved copy): the file's own keys prove nothing",
    );
  const evidence = readJson(file, "the evidence file");
  const keys = await trustedKeys(options.keys);
  process.stderr.write(`keys: ${options.keys}\n`);

  let anchors: AnchorsRead | null = null;
  let chain: { chainId: number; contract: string } | undefined;
  if (!options.offline) {
    const source = anchorSource(options, usage);
    if (!source)
      usage("no chain to read: give --rpc-url and --anchor (or RPC_URL and AUDIT_ANCHOR_ADDRESS), or --offline");
    process.stderr.write(`chain: ${source.rpcUrl}, anchor ${source.anchor} from ${source.senders.join(", ")}\n`);
    chain = { chainId: await chainIdAt(source.rpcUrl), contract: source.anchor };
    // From the block the chain puts the file's anchor transaction in (or the verifier's start block),
    // up to the first window holding an anchor of the checkpoint.
    const named = (evidence as { checkpoint?: { transaction?: unknown } } | null)?.checkpoint?.transaction;
    const from = await searchFrom(source, [typeof named === "string" ? named : null]);
    anchors = ({ shard, seq }) => chainAnchors(source, from, anchorSeqOf(shard, seq));
  }

  const verdict = await verifyEvidence(evidence, { keys, anchors, ...chain });
  for (const c of verdict.checks) console.log(`${c.outcome.padEnd(7)} ${c.check}: ${c.detail}`);
  console.log(verdict.ok ? (anchors === null ? "evidence ok (the chain not read)" : "evidence ok") : "evidence FAILED");
  return verdict.ok;
}
