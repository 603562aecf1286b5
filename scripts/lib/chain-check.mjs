// What the service's local databases recorded as done on chain, looked up on the chain itself:
// `npm run dev` refuses a chain that lacks any of it (docs/operations.md#local), since the service
// would run on deposits, settlements and anchors that no longer exist.
import { spawn } from "node:child_process";
import { ChainStateError } from "./chain-state.mjs";

/**
 * Per kind, the newest transactions recorded as done. A chain that came back from an older save
 * lacks the newest first, and a new chain lacks them all, so these few tell either.
 */
const PER_KIND = 20;
const DONE = [
  ["deposit", "SELECT id, tx_hash FROM deposits ORDER BY block_number DESC, created_at DESC"],
  ["x402 settlement", "SELECT id, tx_hash FROM x402_payments WHERE status = 'settled' ORDER BY updated_at DESC"],
  ["transfer out", "SELECT id, tx_hash FROM outbound_transfers WHERE status = 'confirmed' ORDER BY updated_at DESC"],
  ["payout", "SELECT id, tx_hash FROM payouts WHERE status = 'paid' ORDER BY updated_at DESC"],
  [
    "refund",
    "SELECT id, tx_hash FROM refunds WHERE status = 'succeeded' AND tx_hash IS NOT NULL ORDER BY updated_at DESC",
  ],
  ["treasury funding", "SELECT id, tx_hash FROM treasury_fundings ORDER BY id DESC"],
  [
    "audit anchor",
    "SELECT 'checkpoint ' || seq AS id, tx_hash FROM audit_checkpoints WHERE anchor_status = 'confirmed' ORDER BY seq DESC",
  ],
];
// One statement per kind (D1 refuses a compound SELECT of this many terms); each answers apart. Last,
// the chain watchers' cursors (the deposit watcher's), which must not be ahead of the chain.
const SQL = [
  ...DONE.map(([kind, select]) => `SELECT '${kind}' AS kind, * FROM (${select} LIMIT ${PER_KIND})`),
  "SELECT 'cursor' AS kind, name AS id, NULL AS tx_hash, block_number FROM chain_cursors",
].join("; ");

/** Runs `command` on `binding`'s local database with `wrangler d1 execute` (`args`: where its state is, which configuration). */
function d1(binding, command, { wrangler, args, cwd, env }) {
  return new Promise((resolve, reject) => {
    const child = spawn(wrangler, ["d1", "execute", binding, "--local", ...args, "--json", "--command", command], {
      cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.stderr.on("data", (chunk) => {
      err += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`wrangler d1 execute ${binding} failed:\n${err || out}`));
      resolve(JSON.parse(out).flatMap((answer) => answer.results));
    });
  });
}

/**
 * What `binding`'s local database recorded: the transactions done, `{ kind, id, tx_hash, binding }`,
 * and the cursors, `{ kind: "cursor", id, block_number, binding }`.
 */
export async function recordedIn(binding, reading) {
  return (await d1(binding, SQL, reading)).map((row) => ({ ...row, binding }));
}

async function headOf(rpcUrl) {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] }),
  });
  return Number((await res.json()).result);
}

/** The ones of `recorded` whose transaction the chain at `rpcUrl` has no receipt for (one batched request). */
export async function lackingOn(rpcUrl, recorded) {
  if (recorded.length === 0) return [];
  const calls = recorded.map((row, id) => ({
    jsonrpc: "2.0",
    id,
    method: "eth_getTransactionReceipt",
    params: [row.tx_hash],
  }));
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(calls),
  });
  const answers = await res.json();
  const failed = answers.find((answer) => answer.error);
  if (failed)
    throw new Error(`the chain at ${rpcUrl} did not answer eth_getTransactionReceipt: ${failed.error.message}`);
  const found = new Set(answers.filter((answer) => answer.result).map((answer) => answer.id));
  return recorded.filter((_, id) => !found.has(id));
}

/**
 * The `check` of startLocalChain for `npm run dev`: refuses a chain that lacks a transaction the
 * service's databases (DB and DB_SHARD_1) recorded as done. A cursor ahead of a chain that holds
 * all of it (the chain came back from a save a few empty blocks behind) is set back to the chain's
 * head, so that the deposit watcher reads every block the chain mines from now on. `reading` says
 * how to run wrangler on the databases; `chainDir` is where the chain's state is kept, for the message.
 */
export function chainCheck({ chainDir, log, ...reading }) {
  return async (rpcUrl, { kept }) => {
    const rows = (await Promise.all(["DB", "DB_SHARD_1"].map((binding) => recordedIn(binding, reading)))).flat();
    const done = rows.filter((row) => row.tx_hash);
    const lacking = await lackingOn(rpcUrl, done);
    if (lacking.length > 0) {
      const why = kept
        ? `the chain is behind the database: it stopped before its last save, or its state (${chainDir}) was deleted`
        : `the chain answering at ${rpcUrl} was not started by npm run dev for this state directory: stop it, or set another ANVIL_PORT`;
      throw new ChainStateError(
        [
          `the local chain at ${rpcUrl} lacks ${lacking.length} transaction(s) the service's database recorded as done:`,
          ...lacking.map((row) => `  ${row.kind} ${row.id} (${row.binding}): ${row.tx_hash}`),
          `${why}.`,
        ].join("\n"),
      );
    }
    const head = await headOf(rpcUrl);
    for (const cursor of rows.filter((row) => row.kind === "cursor" && row.block_number > head)) {
      log(
        `the chain watcher's cursor ${cursor.id} (block ${cursor.block_number}) is set back to the chain's head ${head}`,
      );
      await d1(
        cursor.binding,
        `UPDATE chain_cursors SET block_number = ${head}, updated_at = '${new Date().toISOString()}' WHERE name = '${cursor.id.replaceAll("'", "''")}' AND block_number > ${head}`,
        reading,
      );
    }
  };
}

/** How to start over from `stateDir` (the service's and the chain's state). */
export const startingOver = (stateDir) =>
  `To start over with an empty database and a new chain: stop npm run dev, delete ${stateDir} (the local database and the chain's state), and run npm run dev again.`;
