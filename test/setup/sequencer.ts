import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds the slowest test files took in a full run on the loaded 2-core machine, three at a time
 * (their hooks included, not their Worker's start): they start first, so the run does not end
 * waiting for one of them started last. A file missing here is placed by its size; a run with a
 * result cache (a second run in one clone) places every file by the time it took last.
 */
const SLOW_FILES: Record<string, number> = {
  "test/e2e/dev-chain.test.ts": 78,
  "test/e2e/quickstart.test.ts": 74,
  "test/e2e/audit-shards.test.ts": 48,
  "test/e2e/console-browser.test.ts": 47,
  "test/e2e/x402-clients.test.ts": 37,
  "test/e2e/evidence-shards.test.ts": 32,
  "test/e2e/client.test.ts": 26,
  "test/e2e/bench-threads.test.ts": 26,
  "test/e2e/docs-browser.test.ts": 26,
  "test/e2e/shards-dev.test.ts": 21,
  "test/hardening/fuzz.test.ts": 78,
  "test/ledger/ledger.property.test.ts": 50,
  "test/hardening/secrets-at-rest.test.ts": 47,
  "test/webhooks/delivery.test.ts": 24,
  "test/shards/faults.test.ts": 23,
  "test/shards/refunds.test.ts": 22,
  "test/mcp/idempotency.test.ts": 21,
  "test/agents/keys-and-freeze.test.ts": 20,
};

/** Longest first, over every project at once: the files of all projects share the workers (maxWorkers). */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const expected = (spec: TestSpecification) => {
      const path = relative(root, spec.moduleId);
      const last = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      if (last) return last.duration / 1000;
      // A file of some 10 kB takes some 10 s, its Worker's start included.
      return SLOW_FILES[path] ?? (this.ctx.cache.getFileStats(`${spec.project.name}:${path}`)?.size ?? 0) / 1000;
    };
    const order = new Map(files.map((spec) => [spec, expected(spec)]));
    return [...files].sort((a, b) => order.get(b)! - order.get(a)!);
  }
}
