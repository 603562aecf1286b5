import type { Env } from "../src/config/env";
import type { BenchFloorDurableObject } from "./floor.do";

/** The service's env plus the floor object, which only the bench's Worker binds (bench/wrangler.toml). */
export type BenchEnv = Env & { BENCH_FLOOR: DurableObjectNamespace<BenchFloorDurableObject> };
