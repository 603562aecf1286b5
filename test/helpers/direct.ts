import { env } from "cloudflare:workers";
import worker from "../../src/index";
import { type CallOptions, requestThrough, useDispatch } from "./api";

/*
 * Requests straight into the Worker's fetch handler (src/index.ts with its bindings), from the test
 * itself. The harness's own dispatch (`api`, through `exports.default`) gets slower with every
 * request a file has made: each one wraps the entrypoint's prototype in one more Proxy
 * (cloudflare/workers-sdk#15446), so a file's thousandth request costs some 200 ms and a file with
 * many requests spends minutes there. Each request here is the same handler and the same answer.
 */

/** A request's execution context: what it hands to waitUntil runs on, and a failure is logged, as workerd does. */
function executionContext(): ExecutionContext {
  return {
    waitUntil: (work: Promise<unknown>) => {
      work.catch((error: unknown) => console.error("waitUntil work failed:", error));
    },
    passThroughOnException: () => {},
    props: {},
  } as unknown as ExecutionContext;
}

/** One request through the Worker's fetch handler. */
export const fetchDirectly = async (request: Request): Promise<Response> =>
  (await worker.fetch!(request as never, env, executionContext())) as unknown as Response;

/** `api`'s call, straight into the Worker's fetch handler. */
export const callWorker = (method: string, path: string, options: CallOptions = {}) =>
  requestThrough(fetchDirectly, method, path, options);

/** Every `api` call of the calling test file (and of the helpers it calls) goes straight into the fetch handler. */
export function dispatchDirectly() {
  useDispatch(fetchDirectly);
}
