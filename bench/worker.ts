import service from "../src/index";
import type { BenchEnv } from "./env";
import { BENCH_PREFIX, benchFetch } from "./routes";

// The Worker `npm run bench` runs (bench/wrangler.toml): the service as it ships, plus the runtime
// floors under /__bench/ and the floor object. The service's bundle and production configuration
// have no trace of either.

export { GrantDurableObject, LedgerDurableObject, WalletDurableObject, X402SettlerDurableObject } from "../src/index";
export { BenchFloorDurableObject } from "./floor.do";

export default {
  async fetch(request, env, ctx) {
    if (new URL(request.url).pathname.startsWith(BENCH_PREFIX)) {
      // bench/wrangler.toml has no production environment; given one anyway (an absent ENVIRONMENT is
      // production, as in the settings), fail closed.
      if ((env.ENVIRONMENT ?? "production") === "production")
        throw new Error("the bench Worker never runs in production");
      const response = await benchFetch(request, env);
      if (response) return response;
    }
    return service.fetch!(request, env, ctx);
  },
  scheduled: service.scheduled,
  queue: service.queue,
} satisfies ExportedHandler<BenchEnv>;
