// `evidence verify FILE` of the CLI: a charge's evidence file (GET /merchant/charges/:chargeId/evidence)
// checked offline by src/receipts/evidence-verify.ts, with the keys and the chain the verifier chooses.
import { readFileSync } from "node:fs";
import type { JWK } from "jose";
import { anchorsIn, type OnChainAnchor } from "../../src/audit/anchor-abi";
import { verifyEvidence } from "../../src/receipts/evidence-verify";
import { recordedLocalChain } from "./audit-verify";

export interface EvidenceOptions {
  /** Where to fetch the key set to trust (the service's /.well-known/jwks.json); default: the file's copy. */
  keys?: string;
  "rpc-url"?: string;
  /** The anchor contract to accept; default: the one the file names. */
  anchor?: string;
  /** Don't read the chain. */
  offline?: boolean;
}

async function rpc<T>(url: string, method: string, params: unknown[]): Promise<T> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });
  } catch {
    throw new Error(`cannot reach the chain at ${url}`);
  }
  const body = (await response.json()) as { result?: T; error?: { message?: string } };
  if (body.error) throw new Error(`${method} failed: ${body.error.message ?? response.status}`);
  return body.result as T;
}

/** The anchors the checkpoint's transaction emitted from `contract`, as the chain says (none if not mined). */
async function anchorsOfTransaction(url: string, transaction: string, contract: `0x${string}`) {
  const receipt = await rpc<{ status: string; logs: Parameters<typeof anchorsIn>[0] } | null>(
    url,
    "eth_getTransactionReceipt",
    [transaction],
  );
  if (receipt?.status !== "0x1") return [];
  return anchorsIn(receipt.logs, contract);
}

/** Prints each check and the verdict on standard output; whether the evidence holds. */
export async function verifyEvidenceFile(file: string, options: EvidenceOptions): Promise<boolean> {
  let evidence: {
    checkpoint?: { transaction?: string | null };
    anchor?: { contract?: string; chainId?: number } | null;
  };
  try {
    evidence = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new Error(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  let keys: { keys: JWK[] } | undefined;
  if (options.keys) {
    const response = await fetch(options.keys).catch(() => null);
    if (!response?.ok) throw new Error(`cannot fetch the keys at ${options.keys}`);
    keys = (await response.json()) as { keys: JWK[] };
    process.stderr.write(`keys: ${options.keys}\n`);
  } else
    process.stderr.write(
      "keys: the file's own copy (pass --keys <service>/.well-known/jwks.json to trust the service's)\n",
    );

  let anchors: OnChainAnchor[] | null = null;
  const rpcUrl = options["rpc-url"] ?? process.env.RPC_URL ?? recordedLocalChain().rpcUrl;
  const contract = (options.anchor ?? evidence.anchor?.contract)?.toLowerCase() as `0x${string}` | undefined;
  const transaction = evidence.checkpoint?.transaction;
  if (!options.offline && rpcUrl && contract && transaction) {
    process.stderr.write(`chain: ${rpcUrl}, anchor contract ${contract}\n`);
    anchors = await anchorsOfTransaction(rpcUrl, transaction, contract);
  } else if (!options.offline && transaction)
    process.stderr.write("no chain to read (--rpc-url or RPC_URL): the anchoring transaction is not checked\n");
  else if (!options.offline && !transaction) anchors = [];

  const verdict = await verifyEvidence(evidence, { keys, anchors });
  for (const c of verdict.checks) console.log(`${c.outcome.padEnd(7)} ${c.check}: ${c.detail}`);
  console.log(verdict.ok ? "evidence ok" : "evidence FAILED");
  return verdict.ok;
}
