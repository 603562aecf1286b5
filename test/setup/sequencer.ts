import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds the slowest test files took on the 2-core machine (a full run, each file with its Worker's
 * start): they start first, so the run does not end waiting for one of them started last. A file
 * missing here is placed by its size; a run that has a result cache (a second run on one machine)
 * places every file by the duration it took last time.
 */
const SLOW_FILES: Record<string, number> = {
  "test/e2e/dev-chain.test.ts": 110,
  "test/e2e/client.test.ts": 90,
  "test/e2e/quickstart.test.ts": 85,
  "test/e2e/shards-dev.test.ts": 60,
  "test/e2e/audit-shards.test.ts": 55,
  "test/e2e/console-browser.test.ts": 50,
  "test/e2e/x402-clients.test.ts": 50,
  "test/e2e/evidence-shards.test.ts": 45,
  "test/e2e/docs-browser.test.ts": 40,
  "test/e2e/bench-threads.test.ts": 40,
  "test/hardening/route-matrix.test.ts": 100,
  "test/ledger/ledger.property.test.ts": 40,
  "test/auth/matrix.test.ts": 30,
  "test/hardening/fuzz.test.ts": 30,
  "test/shards/refunds.test.ts": 30,
  "test/openapi/contract.test.ts": 25,
  "test/shards/faults.test.ts": 25,
  "test/webhooks/delivery.test.ts": 25,
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
