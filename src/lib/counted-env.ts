import { currentInvocation } from "./invocation";

/*
 * The env a cron job runs with: the same bindings, each call counted in the current invocation as
 * Cloudflare counts it. Every D1 statement executed (first, all, run, raw, and each statement of a
 * batch) is a D1 query; a call on a Durable Object's stub, a queue send and an R2 call are each a
 * subrequest. RPC requests to the chain count themselves (`withSlot`). The bindings are told apart by
 * their shape, so this knows no binding's name and no domain.
 */

const STATEMENT = Symbol("counted statement");
type Counted = D1PreparedStatement & { [STATEMENT]: D1PreparedStatement };

const spend = (kind: "d1Queries" | "subrequests", n = 1) => currentInvocation().count(kind, n);

/** The statement a counted one wraps (a batch takes the real ones). */
const inner = (s: D1PreparedStatement): D1PreparedStatement => (s as Counted)[STATEMENT] ?? s;

function countedStatement(s: D1PreparedStatement): D1PreparedStatement {
  const counted = {
    [STATEMENT]: s,
    bind: (...values: unknown[]) => countedStatement(s.bind(...values)),
    first: (column?: string) => {
      spend("d1Queries");
      return column === undefined ? s.first() : s.first(column);
    },
    all: () => {
      spend("d1Queries");
      return s.all();
    },
    run: () => {
      spend("d1Queries");
      return s.run();
    },
    raw: (options?: { columnNames?: boolean }) => {
      spend("d1Queries");
      return options?.columnNames ? s.raw({ columnNames: true }) : s.raw();
    },
  };
  return counted as unknown as D1PreparedStatement;
}

function countedD1(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => countedStatement(target.prepare(sql));
      if (prop === "batch")
        return (statements: D1PreparedStatement[]) => {
          spend("d1Queries", statements.length);
          return target.batch(statements.map(inner));
        };
      if (prop === "exec")
        return (sql: string) => {
          // exec runs each statement of the text: count one per statement it holds.
          spend("d1Queries", Math.max(1, sql.split(";").filter((part) => part.trim() !== "").length));
          return target.exec(sql);
        };
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** Names a stub answers that are not calls to the object (a promise's `then`, its id and name). */
const NOT_CALLS = new Set<string | symbol>(["then", "id", "name", "toJSON", "constructor"]);

/** An object whose every method call is one subrequest (a Durable Object stub, a queue, an R2 bucket). */
function countedCalls<T extends object>(target: T): T {
  return new Proxy(target, {
    get(t, prop) {
      const value = Reflect.get(t, prop);
      if (typeof prop === "symbol" || NOT_CALLS.has(prop) || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        spend("subrequests");
        // Reflect.apply: on an RPC stub, `.apply` would be taken for a remote method of that name.
        return Reflect.apply(value as (...a: unknown[]) => unknown, t, args);
      };
    },
  });
}

function countedNamespace(ns: DurableObjectNamespace): DurableObjectNamespace {
  return new Proxy(ns, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      // A stub comes from get / getByName; ids and jurisdictions are made locally and pass through.
      if (prop === "get" || prop === "getByName")
        return (...args: unknown[]) => countedCalls(Reflect.apply(value as (...a: unknown[]) => object, target, args));
      return value.bind(target);
    },
  });
}

const has = (value: unknown, ...methods: string[]) =>
  typeof value === "object" &&
  value !== null &&
  methods.every((m) => typeof (value as Record<string, unknown>)[m] === "function");

/** The binding counted by its kind, or as it is for a kind no limit counts (vars, rate limits, assets). */
function counted(value: unknown): unknown {
  if (has(value, "prepare", "batch", "exec")) return countedD1(value as D1Database);
  if (has(value, "idFromName", "get")) return countedNamespace(value as DurableObjectNamespace);
  if (has(value, "send", "sendBatch")) return countedCalls(value as object);
  if (has(value, "put", "get", "head", "list", "delete")) return countedCalls(value as object);
  return value;
}

/** `env` with every D1 database, Durable Object namespace, queue and R2 bucket counted (a new object: settings and placements made from it are its own). */
export function countedEnv<E extends object>(env: E): E {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(env)) out[name] = counted(value);
  return out as E;
}
