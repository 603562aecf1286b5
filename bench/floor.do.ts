import { DurableObject } from "cloudflare:workers";
import type { Env } from "../src/config/env";
import type { SqlStatement } from "../src/db/statements";
import { serialQueue } from "../src/lib/serial";

/**
 * The Durable Object floors of `npm run bench`: an RPC that does nothing, and
 * an RPC that runs one payment-sized D1 batch. Bound only by the bench's own
 * Worker (bench/wrangler.toml); the service never knows it.
 */
export class BenchFloorDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();

  /** The cheapest RPC there is: what one Durable Object hop costs. */
  ping(): number {
    return 1;
  }

  /**
   * Runs the statements as one D1 batch. `oneAtATime` queues batches like the
   * ledger sequencer does (src/ledger/ledger.do.ts), so the two variants show
   * what serializing every commit costs by itself.
   */
  runBatch(statements: SqlStatement[], oneAtATime: boolean): Promise<number> {
    const run = async () => {
      const db = this.env.DB;
      const results = await db.batch(statements.map((s) => db.prepare(s.sql).bind(...s.params)));
      return results.length;
    };
    return oneAtATime ? this.serialize(run) : run();
  }
}
