import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { longFunctions } from "../../scripts/house/long-functions.mjs";

// Files and functions that read in one pass (#38): no file of src/ over 400 lines, no function over 80.

const repo = path.resolve(import.meta.dirname, "../..");
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return /\.tsx?$/.test(name) ? [full] : [];
  });
}

const linesOf = (file: string) => readFileSync(file, "utf8").replace(/\n$/, "").split("\n").length;

describe("sizes", () => {
  it("no file of src/ runs past 400 lines", () => {
    const long = sourceFiles(path.join(repo, "src"))
      // The OFAC list is data, generated from the published list.
      .filter((file) => !file.endsWith("ofac-sdn-eth.ts"))
      .filter((file) => linesOf(file) > MAX_FILE_LINES)
      .map((file) => `${path.relative(repo, file)}: ${linesOf(file)} lines`);
    expect(long).toEqual([]);
  });

  it("no function of src/ runs past 80 lines", { timeout: 60_000 }, () => {
    const long = longFunctions(repo, MAX_FUNCTION_LINES).map((f) => `${f.file}:${f.line} ${f.name} (${f.lines})`);
    expect(long).toEqual([]);
  });

  it("the function measure finds a long one, nested or not, and passes a short one", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sizes-"));
    try {
      mkdirSync(path.join(dir, "src"));
      const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join("\n");
      writeFileSync(
        path.join(dir, "src/a.ts"),
        `export function short() {\n${body(10)}\n}\n` +
          `export const outer = () => {\n  const inner = function () {\n${body(85)}\n  };\n  return inner;\n};\n`,
      );
      const found = longFunctions(dir, MAX_FUNCTION_LINES).map((f) => `${f.file}:${f.line} ${f.name}`);
      expect(found).toEqual(["src/a.ts:13 outer", "src/a.ts:14 inner"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
