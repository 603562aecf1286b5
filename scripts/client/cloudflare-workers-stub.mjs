// The document builder imports the route modules, and some of them the Durable
// Object classes, which extend `DurableObject` from the Workers runtime. Node
// has no `cloudflare:workers`; building the document needs only the class to
// exist, never to run, so this hook answers that one specifier with a stand-in.
import { register } from "node:module";

register(
  "data:text/javascript," +
    encodeURIComponent(`
      export async function resolve(specifier, context, next) {
        if (specifier === "cloudflare:workers") {
          return { url: "data:text/javascript,export class DurableObject {}; export class WorkerEntrypoint {}; export const env = {};", shortCircuit: true };
        }
        return next(specifier, context);
      }
    `),
);
