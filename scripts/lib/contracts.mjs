// Compiles contracts/TestUSDC.sol with solc from npm (no network, no native
// toolchain) and caches the artifact under .cache/, keyed by the source hash.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
const sourcePath = `${root}contracts/TestUSDC.sol`;

/** @returns {{ abi: unknown[]; bytecode: `0x${string}` }} */
export function compileTestUsdc() {
  const source = readFileSync(sourcePath, "utf8");
  const key = createHash("sha256").update(source).digest("hex").slice(0, 16);
  const cacheDir = `${root}.cache`;
  const cachePath = `${cacheDir}/TestUSDC.${key}.json`;
  if (existsSync(cachePath)) return JSON.parse(readFileSync(cachePath, "utf8"));
  const solc = createRequire(import.meta.url)("solc");
  const input = {
    language: "Solidity",
    sources: { "TestUSDC.sol": { content: source } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join("\n")}`);
  const contract = output.contracts["TestUSDC.sol"].TestUSDC;
  const artifact = { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
  mkdirSync(cacheDir, { recursive: true });
  writeFileSync(cachePath, JSON.stringify(artifact));
  return artifact;
}
