import { z } from "zod";
import { archiveHistory } from "../src/archive/archive";
import { publicClientOf, rpcCall } from "../src/chain/client";
import { makeCheckpoint } from "../src/checkpoints/checkpoints";
import { settingsOf } from "../src/config/env";
import { retentionJob } from "../src/jobs/retention";
import { ledgerOf } from "../src/ledger/ledger.do";
import { placementOf } from "../src/ledger/place";
import { decodePaymentHeader } from "../src/x402/payload";
import { termsFor, termsForValue } from "../src/x402/terms";
import { checkTransfer, gasAccountOf } from "../src/x402/transfer";
import { verifyOffline } from "../src/x402/verify";
import { createScratch, dropScratch, paymentShapedBatch } from "./batch";
import type { BenchEnv as Env } from "./env";
import { BENCH_OUTBOUND_BASE_UNITS, outboundPaymentOnce, signOutboundOnce } from "./outbound";

/**
 * The runtime floors of `npm run bench` (docs/benchmarks.md), served by the bench's own Worker
 * (bench/worker.ts) beside the service, never by the service itself. Every path is under
 * /__bench/; anything else goes to the service.
 */
export const BENCH_PREFIX = "/__bench/";

const FloorBody = z
  .object({ i: z.number().int().min(0), agentId: z.string().min(1), merchantId: z.string().min(1) })
  .strict();
const SetupBody = z
  .object({ templateChargeId: z.string().min(1), charges: z.number().int().positive().max(2_000_000) })
  .strict();
const VerifyBody = z
  .object({
    header: z.string().min(1),
    amountMinor: z.number().int().positive(),
    payTo: z.string().regex(/^0x[0-9a-fA-F]{40}$/),
    iterations: z.number().int().positive().max(10_000).default(1),
  })
  .strict();
/** The steps a payment is made of, each timed alone (`npm run bench` prints what one costs). */
export const BENCH_STEPS = [
  "d1_read",
  "do_rpc",
  "rpc_call",
  "rpc_call_viem",
  "sign_transaction",
  "sign_authorization",
  "rpc_check_batch",
] as const;
const StepBody = z
  .object({ step: z.enum(BENCH_STEPS), iterations: z.number().int().positive().max(1_000).default(1) })
  .strict();

const json = (body: unknown, status = 200) => Response.json(body, { status });

async function bodyOf<T>(request: Request, schema: z.ZodType<T>): Promise<T | Response> {
  let raw: unknown;
  try {
    raw = await request.json();
  } catch {
    return json({ error: "invalid_request" }, 400);
  }
  const parsed = schema.safeParse(raw);
  return parsed.success ? parsed.data : json({ error: "invalid_request", issues: parsed.error.issues }, 400);
}

const floorObject = (env: Env) => env.BENCH_FLOOR.getByName("floor");

/**
 * What one step does: a one-statement D1 read (the round trip every payment's lookups pay), a
 * Durable Object RPC, one JSON-RPC call to the chain (as the settlement path makes them, and through
 * viem's client, as reconciliation and the deposit watcher do), the settler's signature of a
 * transfer (never sent), an outbound x402 authorization's typed-data signature by the settlement key,
 * and the built-in facilitator's check of a payment (`checkTransfer`: one JSON-RPC batch with the
 * nonce's state, the payer's balance, the head, the transfer's gas estimate and, when the shared
 * estimate is stale, the fees), on an authorization from the settlement address that is never sent.
 */
function stepOf(env: Env, step: (typeof BENCH_STEPS)[number]): ((k: number) => Promise<unknown>) | Response {
  if (step === "d1_read")
    return () => env.DB.prepare("SELECT id FROM charges WHERE id = ?").bind("chg_bench_step").first();
  if (step === "do_rpc") return () => floorObject(env).ping();
  const x = settingsOf(env).x402;
  if (!x) return json({ error: "x402_not_configured" }, 503);
  if (step === "rpc_call") return () => rpcCall(x, "eth_chainId", []);
  if (step === "rpc_call_viem") return () => publicClientOf(x).request({ method: "eth_chainId" });
  if (step === "sign_authorization") {
    const settlementKey = x.settlementPrivateKey;
    if (!settlementKey) return json({ error: "treasury_not_configured" }, 503);
    return () => signOutboundOnce(x, settlementKey);
  }
  const [key] = x.facilitatorPrivateKeys;
  if (!key) return json({ error: "facilitator_not_configured" }, 503);
  const account = gasAccountOf(key);
  if (step === "rpc_check_batch") {
    const settlementKey = x.settlementPrivateKey;
    if (!settlementKey) return json({ error: "treasury_not_configured" }, 503);
    const terms = termsForValue(x, "bench", BENCH_OUTBOUND_BASE_UNITS, "bench", gasAccountOf(settlementKey).address);
    return async () => checkTransfer(x, terms, await outboundPaymentOnce(x, settlementKey), account.address);
  }
  return (k) =>
    account.signTransaction({
      type: "eip1559",
      chainId: x.chainId,
      to: x.asset,
      data: "0x",
      gas: 100_000n,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      nonce: k,
    });
}

/** Outbox events of ledger shards k ≥ 1 not yet forwarded to control (dispatchOutbox forwards them). */
async function unforwardedEvents(env: Env): Promise<number> {
  const counts = await Promise.all(
    placementOf(env)
      .each()
      .map(async ({ db, isControl }) => {
        if (isControl) return 0;
        const row = await db
          .prepare("SELECT COUNT(*) AS n FROM outbox_events WHERE dispatched_at IS NULL")
          .first<{ n: number }>();
        return Number(row?.n ?? 0);
      }),
  );
  return counts.reduce((a, n) => a + n, 0);
}

/** Answers a /__bench/ request, or null for any other path. */
export async function benchFetch(request: Request, env: Env): Promise<Response | null> {
  const path = new URL(request.url).pathname;
  if (!path.startsWith(BENCH_PREFIX)) return null;
  const route = `${request.method} ${path.slice(BENCH_PREFIX.length)}`;
  switch (route) {
    // Floor: a trivial route of the same Worker.
    case "GET noop":
      return json({ ok: true });

    // Floor: one Durable Object RPC.
    case "POST do-rpc":
      return json({ ok: (await floorObject(env).ping()) === 1 });

    // Floor: one payment-sized D1 batch, from the Worker.
    case "POST d1-batch": {
      const body = await bodyOf(request, FloorBody);
      if (body instanceof Response) return body;
      const db = env.DB;
      const statements = paymentShapedBatch(body.i, body.agentId, body.merchantId);
      await db.batch(statements.map((s) => db.prepare(s.sql).bind(...s.params)));
      return json({ ok: true, statements: statements.length });
    }

    // Floor: one Durable Object RPC that runs that batch (`serial`: one at a time, as the ledger sequencer does).
    case "POST do-d1-batch":
    case "POST do-d1-batch-serial": {
      const body = await bodyOf(request, FloorBody);
      if (body instanceof Response) return body;
      const statements = paymentShapedBatch(body.i, body.agentId, body.merchantId);
      const ran = await floorObject(env).runBatch(statements, route.endsWith("serial"));
      return json({ ok: ran === statements.length, statements: ran });
    }

    // Floor of an outbound x402 authorization: the settlement key's typed-data signature, then that RPC and batch.
    case "POST sign-do-d1-batch": {
      const body = await bodyOf(request, FloorBody);
      if (body instanceof Response) return body;
      const x = settingsOf(env).x402;
      if (!x) return json({ error: "x402_not_configured" }, 503);
      if (!x.settlementPrivateKey) return json({ error: "treasury_not_configured" }, 503);
      await signOutboundOnce(x, x.settlementPrivateKey);
      const statements = paymentShapedBatch(body.i, body.agentId, body.merchantId);
      const ran = await floorObject(env).runBatch(statements, false);
      return json({ ok: ran === statements.length, statements: ran });
    }

    // x402 verification alone (decode, terms, window, signature recovery): CPU only, `iterations` times.
    case "POST x402-verify": {
      const body = await bodyOf(request, VerifyBody);
      if (body instanceof Response) return body;
      const x = settingsOf(env).x402;
      if (!x) return json({ error: "x402_not_configured" }, 503);
      const nowSeconds = Math.floor(Date.now() / 1000);
      let verdict: { isValid: boolean; invalidReason?: string } = { isValid: false, invalidReason: "invalid_payload" };
      for (let k = 0; k < body.iterations; k++) {
        const payment = decodePaymentHeader(body.header);
        if (!payment) break;
        verdict = await verifyOffline(
          x,
          termsFor(x, "bench", body.amountMinor, "bench", body.payTo as `0x${string}`),
          payment,
          nowSeconds,
        );
      }
      return json(
        { valid: verdict.isValid, reason: verdict.invalidReason ?? null, iterations: body.iterations },
        verdict.isValid ? 200 : 422,
      );
    }

    // One step of the payment paths, `iterations` times in a row: the runner times 51 against 1.
    case "POST step": {
      const body = await bodyOf(request, StepBody);
      if (body instanceof Response) return body;
      const run = stepOf(env, body.step);
      if (run instanceof Response) return run;
      for (let k = 0; k < body.iterations; k++) await run(k);
      return json({ ok: true, step: body.step, iterations: body.iterations });
    }

    // Work the service still has queued: the runner waits for none before each scenario, so one
    // scenario's leftovers (outbox fan-out, deliveries) do not slow the next.
    case "GET backlog": {
      const [outbox, deliveries] = await env.DB.batch([
        env.DB.prepare("SELECT COUNT(*) AS n FROM outbox_events WHERE dispatched_at IS NULL"),
        env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'pending'"),
      ]);
      const count = (r: D1Result | undefined) => Number((r?.results[0] as { n: number } | undefined)?.n ?? 0);
      // With more than one ledger shard, the events shards k ≥ 1 have not forwarded to control yet count too.
      const forwarding = settingsOf(env).ledgerShards > 1 ? await unforwardedEvents(env) : 0;
      const outboxes = count(outbox) + forwarding;
      return json({ outbox: outboxes, deliveries: count(deliveries) });
    }

    // A merchant's payouts by status; with `times=1`, when each decided one was created and decided.
    // POST /merchant/payouts answers before the transfer leaves, so the runner times paid payouts here.
    case "GET payouts": {
      const params = new URL(request.url).searchParams;
      const merchantId = params.get("merchantId");
      if (!merchantId) return json({ error: "invalid_request" }, 400);
      const counts = await env.DB.prepare(
        "SELECT status, COUNT(*) AS n FROM payouts WHERE merchant_id = ? GROUP BY status",
      )
        .bind(merchantId)
        .all<{ status: string; n: number }>();
      const byStatus = { pending: 0, paid: 0, failed: 0 } as Record<string, number>;
      for (const row of counts.results) byStatus[row.status] = row.n;
      if (params.get("times") !== "1") return json(byStatus);
      const times = await env.DB.prepare(
        `SELECT status, created_at AS createdAt, COALESCE(paid_at, updated_at) AS decidedAt
         FROM payouts WHERE merchant_id = ? AND status <> 'pending' ORDER BY created_at`,
      )
        .bind(merchantId)
        .all<{ status: string; createdAt: string; decidedAt: string }>();
      return json({ ...byStatus, decided: times.results });
    }

    // The ledger sequencer's counts so far: the runner reports how many plans each D1 batch carried.
    // `?shard=k` asks shard k's sequencer (default 0); a shard this deployment does not run is refused.
    case "GET ledger": {
      const shard = Number(new URL(request.url).searchParams.get("shard") ?? 0);
      if (!(Number.isInteger(shard) && shard >= 0 && shard < settingsOf(env).ledgerShards))
        return json({ error: "invalid_request" }, 400);
      return json(await ledgerOf(env, shard).stats());
    }

    // How many of a merchant's charges are paid, from its home shard: the runner counts a row's
    // payments with it over the same span as the sequencer's counts (in-flight ones and warm-ups included).
    case "GET paid": {
      const merchantId = new URL(request.url).searchParams.get("merchantId");
      if (!merchantId) return json({ error: "invalid_request" }, 400);
      const place = await placementOf(env).ofKnown("merchant", merchantId);
      if (!place) return json({ error: "not_found" }, 404);
      const row = await place.db
        .prepare("SELECT COUNT(*) AS n FROM charges WHERE merchant_id = ? AND status = 'paid'")
        .bind(merchantId)
        .first<{ n: number }>();
      return json({ merchantId, paid: Number(row?.n ?? 0) });
    }

    // A merchant's or an agent's home ledger shard, from the directory (no public route names it):
    // the shards group places its owners by creating them until the placement puts them where wanted.
    case "GET shard": {
      const params = new URL(request.url).searchParams;
      const kind = params.get("kind");
      const id = params.get("id");
      if ((kind !== "merchant" && kind !== "agent") || !id) return json({ error: "invalid_request" }, 400);
      const row = await env.DB.prepare("SELECT shard FROM shard_directory WHERE owner_kind = ? AND owner_id = ?")
        .bind(kind, id)
        .first<{ shard: number }>();
      return row ? json({ kind, id, shard: row.shard }) : json({ error: "not_found" }, 404);
    }

    // Cross-shard transfers, per shard: the sum of its `transit:<k>` accounts (its side of the money
    // between shards) and its transfers by status. At rest every transfer is decided and the sums
    // over all shards add up to 0.
    case "GET transit": {
      const shards = await Promise.all(
        placementOf(env)
          .each()
          .map(async ({ db, shard }) => {
            const [transit, transfers] = await db.batch([
              db.prepare(
                "SELECT COALESCE(SUM(amount_minor), 0) AS n FROM ledger_entries WHERE account LIKE 'transit:%'",
              ),
              db.prepare("SELECT status, COUNT(*) AS n FROM ledger_transfers GROUP BY status"),
            ]);
            const byStatus = { pending: 0, completed: 0, reversed: 0 } as Record<string, number>;
            for (const row of (transfers?.results ?? []) as { status: string; n: number }[])
              byStatus[row.status] = row.n;
            const inTransitMinor = Number((transit?.results[0] as { n: number } | undefined)?.n ?? 0);
            return { shard, inTransitMinor, transfers: byStatus };
          }),
      );
      return json({ shards });
    }

    // The database's size: its page count times its page size, as D1 reports after any statement.
    // Freed pages stay in the file, so growth is what rows need beyond the pages deletes freed.
    case "GET storage": {
      const result = await env.DB.prepare("SELECT 1").run();
      return json({ bytes: result.meta.size_after });
    }

    // The cron's retention job, with nothing kept: every finished delivery and dispatched event goes now.
    case "POST retention":
      return json(await retentionJob(env, { retentionDays: 0, budgetMs: 120_000 }));

    // The archive job as a run a year from now would go: checkpoints up to the head first (only
    // checkpointed rows leave), then every segment due, the head excepted.
    case "POST archive": {
      while ((await makeCheckpoint(env)).kind === "created");
      let segments = 0;
      for (;;) {
        const run = await archiveHistory(env, { now: Date.now() + 365 * 86_400_000, budgetMs: 60_000 });
        segments += run.segments;
        if (!run.unfinished && run.segments === 0) return json({ segments });
      }
    }

    // Scratch tables for the batch floors (bench/batch.ts).
    case "POST setup": {
      const body = await bodyOf(request, SetupBody);
      if (body instanceof Response) return body;
      return json(await createScratch(env.DB, body.templateChargeId, body.charges));
    }
    case "POST teardown":
      await dropScratch(env.DB);
      return json({ ok: true });

    default:
      return json({ error: "not_found" }, 404);
  }
}
