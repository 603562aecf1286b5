// Compiles a contract of contracts/ (e.g. TestUSDC, AuditAnchor) with solc from npm (no network,
// no native toolchain) and caches the artifact under .cache/, keyed by the contract and its source hash.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The ABI and creation bytecode of `contracts/<name>.sol`'s contract `name`.
 * @param {string} name
 * @returns {{ abi: unknown[]; bytecode: `0x${string}` }}
 */
export function compileContract(name) {
  const source = readFileSync(`${root}contracts/${name}.sol`, "utf8");
  const key = createHash("sha256").update(source).digest("hex").slice(0, 16);
  const cacheDir = `${root}.cache`;
  const cachePath = `${cacheDir}/${name}.${key}.json`;
  if (existsSync(cachePath)) return JSON.parse(readFileSync(cachePath, "utf8"));
  const solc = createRequire(import.meta.url)("solc");
  const file = `${name}.sol`;
  const input = {
    language: "Solidity",
    sources: { [file]: { content: source } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join("\n")}`);
  const contract = output.contracts[file][name];
  const artifact = { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
  mkdirSync(cacheDir, { recursive: true });
  writeFileSync(cachePath, JSON.stringify(artifact));
  return artifact;
}

/** The EIP-3009 test stablecoin. */
export const compileTestUsdc = () => compileContract("TestUSDC");

/** The audit checkpoints' anchoring contract. */
export const compileAuditAnchor = () => compileContract("AuditAnchor");

/** The contract that settles several EIP-3009 authorizations in one transaction. */
export const compileSettlementBatch = () => compileContract("SettlementBatch");
