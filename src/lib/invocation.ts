import { AsyncLocalStorage } from "node:async_hooks";

/*
 * One invocation of the Worker (a request, a cron job, a queue batch) and what it has spent of
 * Cloudflare's per-invocation limits: D1 queries, subrequests, and simultaneous connections. Local
 * workerd enforces none of them, so the service counts for itself: the chain client takes a
 * connection slot for each RPC request and counts it, a job's D1 bindings count their statements,
 * and a job asks `left()` before each item so it stops, and resumes on its next run, before a limit.
 */

/** What one invocation may spend. */
export interface InvocationLimits {
  d1Queries: number;
  subrequests: number;
  /** RPC requests in flight at once (Cloudflare allows 6 open connections per invocation). */
  rpcInFlight: number;
}

/** Cloudflare's per-invocation limits (Workers Paid: 1,000 D1 queries, 1,000 subrequests, 6 connections), with headroom. */
export const INVOCATION_LIMITS: InvocationLimits = { d1Queries: 900, subrequests: 900, rpcInFlight: 4 };

export type Spend = "d1Queries" | "subrequests";

export class Invocation {
  readonly spent = { d1Queries: 0, subrequests: 0 };
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly limits: InvocationLimits = INVOCATION_LIMITS) {}

  count(kind: Spend, n = 1): void {
    this.spent[kind] += n;
  }

  /** Whether `need` more of each can still be spent. */
  left(need: Partial<Record<Spend, number>> = {}): boolean {
    return (
      this.spent.d1Queries + (need.d1Queries ?? 0) <= this.limits.d1Queries &&
      this.spent.subrequests + (need.subrequests ?? 0) <= this.limits.subrequests
    );
  }

  /**
   * Runs `send` once a connection slot is free (at most `rpcInFlight` at once), counting it as a
   * subrequest. Whatever timer `send` starts starts when it is really sent, not while it queued.
   */
  async withSlot<T>(send: () => Promise<T>): Promise<T> {
    // A freed slot passes straight to the longest waiter, so no newcomer takes it in between.
    if (this.inFlight >= this.limits.rpcInFlight) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.inFlight++;
    this.count("subrequests");
    try {
      return await send();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.inFlight--;
    }
  }
}

const current = new AsyncLocalStorage<Invocation>();

/** Runs `work` as an invocation of its own: what it spends is counted apart from any other. */
export function runInvocation<T>(invocation: Invocation, work: () => Promise<T>): Promise<T> {
  return current.run(invocation, work);
}

/**
 * The invocation this code runs in. Outside any (a Durable Object's own call, a test calling a
 * function directly), one shared per isolate: its slots still bound what is in flight at once.
 */
export function currentInvocation(): Invocation {
  return current.getStore() ?? isolateWide;
}

const isolateWide = new Invocation({ ...INVOCATION_LIMITS, d1Queries: Infinity, subrequests: Infinity });
