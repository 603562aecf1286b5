// Regenerates src/kyt/ofac-sdn-eth.ts from a text list (one address a line, `#` comments).
// Usage: node scripts/import-ofac.mjs [list.txt]   (default: data/ofac-sdn-eth.txt)
import { readFileSync, writeFileSync } from "node:fs";

const source = process.argv[2] ?? new URL("../data/ofac-sdn-eth.txt", import.meta.url).pathname;
const lines = readFileSync(source, "utf8").split("\n");
const comments = lines
  .filter((l) => l.startsWith("#"))
  .slice(0, 3)
  .map((l) => `//${l.slice(1)}`);
const addresses = lines
  .map((l) => l.trim())
  .filter((l) => /^0x[0-9a-fA-F]{40}$/.test(l))
  .map((a) => a.toLowerCase());
const out = [
  "// Generated from data/ofac-sdn-eth.txt by scripts/import-ofac.mjs; do not edit by hand.",
  ...comments,
  "export const OFAC_SDN_ETH: readonly string[] = [",
  ...addresses.map((a) => `  "${a}",`),
  "];",
  "",
].join("\n");
writeFileSync(new URL("../src/kyt/ofac-sdn-eth.ts", import.meta.url), out);
console.log(`wrote ${addresses.length} addresses`);
