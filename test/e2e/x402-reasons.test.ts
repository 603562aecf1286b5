import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ErrorReasons } from "x402/types";
import { PROTOCOL_REASONS } from "../../src/x402/reasons";

/**
 * Every reason code the service answers x402 clients with is one of the protocol's own: the v1
 * specification's ErrorReasons (exported by the `x402` package) or a code the v2 reference
 * facilitator for `exact` on EVM answers (`@x402/evm`, which does not export its list: read from
 * its published build, the pinned version in package-lock.json).
 */
function v2ExactEvmReasons(): Set<string> {
  // The package's main entry is dist/cjs/index.js; the facilitator's build sits beside it.
  const main = createRequire(import.meta.url).resolve("@x402/evm");
  const dir = path.join(path.dirname(main), "exact/facilitator");
  const codes = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".js"))) {
    for (const m of readFileSync(path.join(dir, file), "utf8").matchAll(/var Err\w+ = "([a-z0-9_]+)"/g))
      codes.add(m[1]!);
  }
  return codes;
}

describe("x402 reason codes", () => {
  it("are all in the protocol's vocabulary", () => {
    const v2 = v2ExactEvmReasons();
    expect(v2.size, "the v2 facilitator's codes were found").toBeGreaterThan(20);
    const v1 = new Set<string>(ErrorReasons);
    const outside = PROTOCOL_REASONS.filter((code) => !v1.has(code) && !v2.has(code));
    expect(outside).toEqual([]);
  });
});
