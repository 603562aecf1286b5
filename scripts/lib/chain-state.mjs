// The local chain's state kept beside the service's (docs/operations.md#local). anvil keeps its chain in
// memory only; here it runs in a session of its own, so killing `npm run dev`'s process group leaves
// it running for the next start, and its state is saved to files in `dir`, so a chain that stopped
// comes back as it was. What anvil's own `--state-interval` would do is done here instead: anvil
// rewrites its file in place (truncate, then write), and a kill in the middle leaves a torn file
// that no start can load; a save here is written aside and renamed over the last whole one.
import { spawn } from "node:child_process";
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";

/** How often the chain is looked at, and saved when a block with transactions was mined since the last save. */
export const SAVE_SECONDS = 5;

/** A chain that does not hold what the service recorded, or cannot come back: starting over is the way out. */
export class ChainStateError extends Error {}

/** The files of a chain kept in `dir`. */
export function chainFiles(dir) {
  return {
    dir,
    /** The last whole save (written aside, then renamed): what anvil loads on start. */
    saved: path.join(dir, "anvil-state.json"),
    /** anvil's own dump as it stops (SIGTERM, SIGINT): newer than `saved` when it is whole. */
    atExit: path.join(dir, "anvil-state.at-exit.json"),
    pid: path.join(dir, "anvil.pid"),
    log: path.join(dir, "anvil.log"),
  };
}

/** The head block number of a state file, or null when it is absent or torn. */
function headOf(file) {
  try {
    return Number(JSON.parse(readFileSync(file, "utf8")).best_block_number ?? 0);
  } catch {
    return null;
  }
}

/**
 * Makes `saved` the newest whole state of the chain: anvil's dump at exit replaces it when that one
 * is whole and at least as far along; a torn or older one is dropped. The head of `saved`, or null
 * when there is no state yet (a new chain).
 */
export function newestState(files) {
  const lastSave = headOf(files.saved);
  const exitHead = existsSync(files.atExit) ? headOf(files.atExit) : null;
  if (exitHead !== null && (lastSave === null || exitHead >= lastSave)) {
    renameSync(files.atExit, files.saved);
    return exitHead;
  }
  rmSync(files.atExit, { force: true });
  if (lastSave === null && existsSync(files.saved))
    throw new ChainStateError(`the local chain's state file ${files.saved} cannot be read`);
  return lastSave;
}

/** The head block number of the last whole save, or null. */
export const savedHead = (files) => headOf(files.saved);

/**
 * The pid of the anvil an earlier start left running for this directory at `port` (null: at any
 * port), or null. Its command line names this directory's files and the port, so a reused pid is
 * never taken for it.
 */
export function keptAnvilAt(files, port) {
  try {
    const pid = Number(readFileSync(files.pid, "utf8").trim());
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const portAt = args.indexOf("--port");
    return args.includes(files.atExit) && (port === null || args[portAt + 1] === String(port)) ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Starts anvil with `args` in a session of its own (a kill of the caller's process group does not
 * reach it), loading the saved state if there is one and dumping its state when it is stopped.
 * Its output goes to the log file. The child process.
 */
export function spawnKeptAnvil(bin, args, files) {
  mkdirSync(files.dir, { recursive: true });
  const state = existsSync(files.saved) ? ["--load-state", files.saved] : [];
  const log = openSync(files.log, "a");
  const child = spawn(bin, [...args, ...state, "--dump-state", files.atExit], {
    detached: true,
    stdio: ["ignore", log, log],
  });
  closeSync(log);
  child.unref();
  writeFileSync(files.pid, String(child.pid));
  return child;
}

/** The last lines anvil wrote to its log, for an error message. */
export function logTail(files) {
  try {
    return readFileSync(files.log, "utf8").trim().split("\n").slice(-5).join("\n");
  } catch {
    return "";
  }
}

async function rpc(rpcUrl, body) {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return res.json();
}

/** Writes `data` to `file` whole or not at all: aside, flushed to disk, then renamed over it. */
function writeWhole(file, data) {
  const aside = `${file}.${process.pid}.tmp`;
  const fd = openSync(aside, "w");
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(aside, file);
}

/** Whether any block after `from` up to `to` holds a transaction (one batched request; a long stretch is taken as yes). */
async function transactionsBetween(rpcUrl, from, to) {
  if (to - from > 500) return true;
  const calls = [];
  for (let n = from + 1; n <= to; n++)
    calls.push({
      jsonrpc: "2.0",
      id: n,
      method: "eth_getBlockTransactionCountByNumber",
      params: [`0x${n.toString(16)}`],
    });
  if (calls.length === 0) return false;
  const answers = await rpc(rpcUrl, calls);
  return answers.some((answer) => answer.result !== "0x0");
}

/**
 * Saves the chain at `rpcUrl` to `files.saved` every SAVE_SECONDS when blocks with transactions were
 * mined since block `from` (the head of the last save; null for none). Empty blocks alone (one every
 * 2 s) are not worth a save: losing them loses nothing. `stop()` ends it once a save under way is done.
 */
export function keepSaving(rpcUrl, files, from) {
  let checked = from ?? 0;
  let running = Promise.resolve();
  const tick = async () => {
    const head = Number((await rpc(rpcUrl, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })).result);
    if (!(await transactionsBetween(rpcUrl, checked, head))) {
      checked = Math.max(checked, head);
      return;
    }
    const dump = await rpc(rpcUrl, { jsonrpc: "2.0", id: 1, method: "anvil_dumpState", params: [] });
    writeWhole(files.saved, gunzipSync(Buffer.from(dump.result.slice(2), "hex")));
    checked = head;
  };
  // A failed look (anvil busy or gone) is tried again at the next tick.
  const timer = setInterval(() => {
    running = running.then(tick).catch(() => undefined);
  }, SAVE_SECONDS * 1000);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

/** Whether `pid` still runs (an exited process nobody has reaped yet, state Z, does not). */
const alive = (pid) => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};

/**
 * Stops the anvil `pid` (it dumps its state as it exits) and waits until it is gone; one that has not
 * exited after 60 s is killed (its periodic save stays).
 */
export async function stopAnvil(pid) {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + 60_000;
  while (alive(pid)) {
    if (Date.now() > deadline) process.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 100));
  }
}
