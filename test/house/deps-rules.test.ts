import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The import rules of .dependency-cruiser.cjs, each broken on purpose in a small tree of its own:
// a rule that no longer fires (a renamed folder, a regex that stopped matching) fails here, not silently.

const repo = path.resolve(import.meta.dirname, "../..");
const depcruise = path.join(repo, "node_modules/.bin/depcruise");

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** Writes `files` (path → source) under a fresh directory and runs the project's rules over its src/. */
function cruise(dir: string, files: Record<string, string>): Violation[] {
  for (const [file, source] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), source);
  }
  writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "ESNext" } }));
  const out = execFileSync(
    depcruise,
    ["src", "--config", path.join(repo, ".dependency-cruiser.cjs"), "--output-type", "json", "--no-progress"],
    { cwd: dir, encoding: "utf8", maxBuffer: 16 << 20 },
  );
  return (JSON.parse(out) as { summary: { violations: Violation[] } }).summary.violations;
}

const use = (...targets: string[]) =>
  `${targets.map((t, i) => `import * as m${i} from "${t}";`).join("\n")}\nexport const x = 1;\n`;

describe("the import rules", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "deps-rules-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("pass a tree that keeps every layer in its place", () => {
    const violations = cruise(path.join(dir, "clean"), {
      "src/index.ts": use("./app", "./jobs/minute"),
      "src/app.ts": use("./console/page", "./charges/routes"),
      "src/jobs/minute.ts": use("../charges/routes"),
      "src/console/page.ts": use("../charges/routes"),
      "src/charges/routes.ts": use("../ledger/commit", "../config/env", "../db/client", "../chain/client"),
      "src/ledger/commit.ts": use("../config/env", "../lib/ids"),
      "src/config/env.ts": use("../lib/ids"),
      "src/db/client.ts": use("../lib/ids"),
      "src/chain/client.ts": use("../lib/ids"),
      "src/lib/ids.ts": "export const y = 1;\n",
    });
    expect(violations).toEqual([]);
  });

  it("name each deliberate violation", () => {
    const violations = cruise(path.join(dir, "broken"), {
      "src/index.ts": use("./app"),
      "src/app.ts": use("./x402/pay", "./storage/tidy"),
      // The old shape: settings at the root, re-exporting a domain's settings (x402 -> env -> x402).
      "src/env.ts": use("./x402/settings"),
      "src/x402/settings.ts": "export const y = 1;\n",
      "src/x402/pay.ts": use("../env", "../charges/service", "../jobs/minute", "../console/page"),
      "src/charges/service.ts": use("../x402/pay"),
      "src/config/env.ts": use("../ledger/commit"),
      "src/ledger/commit.ts": use("../lib/ids"),
      "src/chain/client.ts": use("../config/env"),
      "src/db/client.ts": use("../ledger/commit"),
      "src/lib/ids.ts": use("../config/env"),
      "src/jobs/minute.ts": use("../x402/pay"),
      "src/console/page.ts": use("../x402/pay"),
      "src/storage/tidy.ts": use("../lib/ids"),
    });
    const found = violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`);
    expect(found).toEqual(
      expect.arrayContaining([
        "root-holds-only-the-entry: src/env.ts -> src/x402/settings.ts",
        "nothing-imports-the-root: src/x402/pay.ts -> src/env.ts",
        "config-knows-no-domain: src/config/env.ts -> src/ledger/commit.ts",
        "chain-knows-no-domain: src/chain/client.ts -> src/config/env.ts",
        "db-knows-no-domain: src/db/client.ts -> src/ledger/commit.ts",
        "lib-knows-no-domain: src/lib/ids.ts -> src/config/env.ts",
        "domains-know-no-job: src/x402/pay.ts -> src/jobs/minute.ts",
        "domains-know-no-surface: src/x402/pay.ts -> src/console/page.ts",
        "every-folder-in-a-layer: src/storage/tidy.ts -> src/lib/ids.ts",
      ]),
    );
    // Folder circles: charges <-> x402 directly, and lib -> config -> ledger -> lib through three.
    const circles = violations.filter((v) => v.rule.name === "no-folder-cycles").map((v) => `${v.from} -> ${v.to}`);
    expect(circles).toEqual(expect.arrayContaining(["src/charges -> src/x402", "src/x402 -> src/charges"]));
    expect(circles.some((c) => c.startsWith("src/config"))).toBe(true);
  });
});
