import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import { waitFor } from "./wait";

/** How an injected fault strikes: an exception, or the Durable Object aborted (a crash) and then the exception. */
export type FaultMode = "throw" | "abort";

/** Strikes at `point` the first time it is reached; answers whether it has struck yet. */
export function injectOnce(point: FaultPoint, mode: FaultMode = "throw"): () => boolean {
  let fired = false;
  setFaultHook((at, context) => {
    if (fired || at !== point) return;
    fired = true;
    if (mode === "abort" && context.abort) context.abort();
    throw new Error(`injected fault at ${point}`);
  });
  return () => fired;
}

/** As injectOnce, answering a wait until it has struck: for a point reached in the background (the cron, a queue). */
export function injectOnceAwaited(point: FaultPoint): () => Promise<boolean> {
  const struck = injectOnce(point);
  return () => waitFor(`the fault at ${point}`, async () => struck(), Boolean);
}
