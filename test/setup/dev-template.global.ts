import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";

/**
 * The local databases of `npm run dev` with every migration applied, made once for the e2e files
 * (test/e2e/dev-server.ts copies them into each server's state directory before it starts).
 * `wrangler d1 migrations apply` takes about a second a migration; every `npm run dev` of the e2e
 * files, applying all of them to both shards' databases on a fresh state directory, spent most of
 * its start there. Made with the same command `npm run dev` runs, so a migration wrangler cannot
 * apply fails here; the servers' own step then finds nothing left to apply.
 *
 * Made in the background: the setup returns at once, and `<dir>/ready` (or `<dir>/failed`, with
 * wrangler's output) says when it is done.
 */
declare module "vitest" {
  export interface ProvidedContext {
    devTemplate: string;
  }
}

const ROOT = path.resolve(import.meta.dirname, "../..");
const WRANGLER = path.join(ROOT, "node_modules/.bin/wrangler");

function apply(binding: string, dir: string): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn(
      WRANGLER,
      [
        "d1",
        "migrations",
        "apply",
        binding,
        "--local",
        "--config",
        path.join(ROOT, "wrangler.toml"),
        "--persist-to",
        dir,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("error", (error) => resolve(`${binding}: ${error}`));
    child.on("exit", (code) => resolve(code === 0 ? null : `${binding}: wrangler exited with ${code}\n${output}`));
  });
}

export function setup(project: TestProject) {
  const dir = mkdtempSync(path.join(tmpdir(), "agent-pay-e2e-template-"));
  project.provide("devTemplate", dir);
  // One after the other: two wranglers on one persist directory share miniflare's own SQLite
  // files, and the second can find them locked (SQLITE_BUSY failed a clean-clone run).
  const state = path.join(dir, "state");
  void (async () => [await apply("DB", state), await apply("DB_SHARD_1", state)])().then((failures) => {
    // A run shorter than the migrations (an e2e file that starts no dev server) has removed the directory already.
    if (!existsSync(dir)) return;
    const failed = failures.filter((f) => f !== null);
    if (failed.length > 0) writeFileSync(path.join(dir, "failed"), failed.join("\n"));
    else writeFileSync(path.join(dir, "ready"), "");
  });
  return () => rmSync(dir, { recursive: true, force: true });
}
