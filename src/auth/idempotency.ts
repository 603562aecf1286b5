import type { Context, Next } from "hono";
import {
  ABANDONED_AFTER_MS,
  IDEMPOTENCY_TTL_MS,
  type IdempotencySlot,
  releaseReservation,
  reservationRunning,
  storeAnswer,
  storeResponseStatements,
} from "../db/idempotency";
import type { SqlStatement } from "../db/statements";
import { answersOf } from "../ledger/answers-place";
import { sha256Hex } from "../lib/crypto";
import { decryptSecret, encryptSecret } from "../lib/encryption";
import { ApiError } from "../lib/errors";
import { faultPoint } from "../lib/faults";
import { nowIso } from "../lib/time";
import { controlHome, type MoneyAct, moneyRequestOf } from "./answers";
import type { AppEnv } from "./app-env";
import type { Actor } from "./credentials";

/** Who a credential names, whichever of its keys or sessions it is. */
function principalOf(actor: Actor): string {
  if (actor.kind === "merchant") return `merchant:${actor.merchantId}`;
  if (actor.kind === "agent") return `agent:${actor.agentId}`;
  return `console:${actor.email.toLowerCase()}`;
}

/** The scope of an actor's keys: the principal, so the HTTP header and the MCP argument of one agent share it. */
export const idempotencyScope = (actor: Actor) => sha256Hex(`idempotency-scope:${principalOf(actor)}`);

/** What a key may be: 1 to 255 printable ASCII characters (the header's and the MCP argument's rule). */
export const IDEMPOTENCY_KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

/**
 * The statements that store a create's answer in the create's own batch,
 * encrypted (it may show a key once); none when the request has no key.
 */
export async function answerInBatch(c: Context<AppEnv>, status: number, body: object): Promise<SqlStatement[]> {
  const slot = c.get("idempotency");
  if (!slot) return [];
  return storeResponseStatements(
    slot,
    status,
    await encryptSecret(c.get("settings").webhookSecretsKey, JSON.stringify(body)),
  );
}

/**
 * Answers never kept under a key: the request failed validation (400, or 415
 * for a body not in UTF-8: the hash does not cover Content-Type, so a fixed
 * charset would get the 415 replayed) or was refused before its endpoint ran
 * (401 and 403: the credential; 429: its rate, whose Retry-After a replay
 * would not carry), so the same key runs again.
 */
const NOT_STORED: ReadonlySet<number> = new Set([400, 401, 403, 415, 429]);

/** Whether a response is the key's final answer: the endpoint ran and did not fail unexpectedly (5xx). */
const isStoredAnswer = (status: number) => status < 500 && !NOT_STORED.has(status);

/** Stored answers that carry a secret are encrypted (`v1:`); money answers are stored as JSON (they carry none). */
const storedText = (material: string, body: string) =>
  body.startsWith("v1:") ? decryptSecret(material, body) : Promise.resolve(body);

/**
 * `Idempotency-Key` on POST (Stripe semantics). The first request with a key
 * reserves it, runs, and its status and body are kept; the same key and the
 * same request replay them byte for byte with `Idempotent-Replayed: true`; the
 * same key with a different request is 409 `idempotency_key_reused`; a
 * duplicate while the first still runs is 409 `idempotency_key_in_use`. An
 * answer is kept only if the endpoint ran (Stripe's rule): a request refused
 * before it (401, 403, 429: see `NOT_STORED`), failed validation (400, 415) or failed
 * unexpectedly (5xx) keeps nothing, so it can be retried with its key. Handlers that change state store their
 * answer in the same D1 batch as the change (`c.get("idempotency")` and
 * `storeResponseStatements`), so no crash can separate the two; for the rest the
 * answer is stored right after. Keys are scoped to who asks (the merchant, the
 * agent or the console user the credential names: not the header's bytes, which
 * `bearer` or a rolled key would change, so a retry after either still replays)
 * and kept 24 h.
 *
 * Where: a request whose route declares that it acts on money (`money`) keeps
 * its key and answer with that money, in the database the ledger's rule names
 * (src/ledger/answers-place.ts), so the batch that moves it stores the answer;
 * any other in control. With several ledger shards control also claims every
 * key, so a key names one request whichever shard its reservation is in. A
 * payment (`money: "pays"`) whose first answer was lost after its transfer left
 * the agent's shard (the 5xx freed the key) is answered with that payment on
 * its retry, never paid twice.
 *
 * `requireActor` runs this once it has admitted the credential (valid now, of
 * the route's kind, within its rate limit), never before: a stored answer,
 * which may show a key once, is replayed only to a working credential of the
 * one who keyed it, and a refused credential gets the same
 * 401 or 403 with or without a key. Routes without a credential (x402) are
 * exactly-once by their own reservation and ignore the header. The MCP
 * paying tools' `idempotencyKey` argument is kept by the same code, under the
 * same scope, except that a repeat waits for the first (`reserveKeyOrWait`).
 */
export async function idempotent(c: Context<AppEnv>, next: Next, money?: MoneyAct): Promise<void> {
  const key = c.req.header("idempotency-key");
  const authorization = c.req.header("authorization");
  if (c.req.method !== "POST" || key === undefined || !authorization) return next();
  if (!IDEMPOTENCY_KEY_SHAPE.test(key)) {
    throw new ApiError(400, "invalid_request", {
      issues: [{ path: "Idempotency-Key", code: "invalid_header", message: "1 to 255 printable ASCII characters" }],
    });
  }
  const actor = c.get("actor");
  // requireActor admitted a credential before this runs; without one there is no one to scope a key to.
  if (!actor) throw new Error("Idempotency-Key handled before the credential was admitted");
  // Read as bytes, so the JSON guard after this still sees them as sent (lib/validation.ts); decoded as
  // c.req.text() would (BOM dropped, U+FFFD for bad bytes), so the hash is the one it always was.
  const body = new TextDecoder().decode(await c.req.arrayBuffer());
  const request: KeyedRequest = {
    scope: await idempotencyScope(actor),
    key,
    requestHash: await sha256Hex(`${c.req.method} ${new URL(c.req.url).pathname}\n${body}`),
  };
  const material = c.get("settings").webhookSecretsKey;
  const answers = answersOf(c.env);
  // The answer lives with the money the request moves (the ledger's rule), else in control.
  const home = money ? await answers.homeOf(moneyRequestOf(c, money, actor, body)) : controlHome(answers);
  // With more than one ledger shard the reservation below may be in any shard: control claims the key first.
  const claimed = answers.sharded;
  if (claimed) await claimKey(answers.control, request);
  const reservation = await reserveKey(home.db, material, request);
  if (reservation.kind === "replay") {
    const { answer } = reservation;
    c.res = new Response(answer.body, {
      status: answer.status,
      headers: { "content-type": answer.contentType ?? "application/json", "idempotent-replayed": "true" },
    });
    return;
  }
  const { slot } = reservation;
  c.set("idempotency", slot);
  await keepAnswer(
    home.db,
    material,
    slot,
    async () => {
      // A retry whose first payment crossed shards and lost its answer is answered with that payment.
      const earlier = await home.earlier(slot);
      if (earlier) c.res = c.json(earlier);
      else await next();
      return { status: c.res.status, contentType: c.res.headers.get("content-type"), body: () => c.res.clone().text() };
    },
    claimed ? () => releaseClaim(answers.control, request) : undefined,
  );
}

/**
 * Claims `key` for this request in control, where every shard's keyed requests meet: a key another
 * request holds (not yet expired) is 409 `idempotency_key_reused`, even when this request's
 * reservation goes to another shard than that one's. The claim lasts as the reservation does, and is
 * freed with it when the request keeps no answer.
 */
async function claimKey(control: D1Database, { scope, key, requestHash }: KeyedRequest): Promise<void> {
  const now = Date.now();
  const claimed = await control
    .prepare(
      `INSERT INTO idempotency_claims (scope, key, request_hash, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, expires_at = excluded.expires_at
       WHERE idempotency_claims.expires_at <= ?
       RETURNING request_hash`,
    )
    .bind(scope, key, requestHash, nowIso(now + IDEMPOTENCY_TTL_MS), nowIso(now))
    .first();
  if (claimed) return;
  const held = await control
    .prepare("SELECT request_hash AS requestHash FROM idempotency_claims WHERE scope = ? AND key = ?")
    .bind(scope, key)
    .first<{ requestHash: string }>();
  if (held && held.requestHash !== requestHash) throw new ApiError(409, "idempotency_key_reused");
}

/** Frees this request's claim, with its reservation, when it keeps no answer: the key may serve a retry. */
const releaseClaim = async (control: D1Database, { scope, key, requestHash }: KeyedRequest) => {
  await control
    .prepare("DELETE FROM idempotency_claims WHERE scope = ? AND key = ? AND request_hash = ?")
    .bind(scope, key, requestHash)
    .run();
};

/** A request under a key: who asks (`scope`), the key, and what is asked (`requestHash`). */
export interface KeyedRequest {
  scope: string;
  key: string;
  requestHash: string;
}

/** An answer stored under a key, as it was given (decrypted). */
export interface KeptAnswer {
  status: number;
  body: string;
  contentType: string | null;
}

/** The answer of a request that ran under its key; `body` is read only if the answer is kept. */
export interface RanAnswer {
  status: number;
  contentType: string | null;
  body: () => Promise<string>;
}

/** What a key holds for a request: reserved for it now, its kept answer, or a reservation still running. */
type Found =
  | { kind: "reserved"; slot: IdempotencySlot }
  | { kind: "replay"; answer: KeptAnswer }
  | { kind: "running"; since: string };

/**
 * Reserves the key for this request, or finds what it holds: the answer kept
 * for the same request (to replay), 409 `idempotency_key_reused` for another
 * request, 409 `idempotency_key_in_use` while the first one still runs. A key
 * past its 24 h, or a reservation abandoned by the same request, is taken over.
 */
export async function reserveKey(
  db: D1Database,
  material: string,
  request: KeyedRequest,
): Promise<{ kind: "reserved"; slot: IdempotencySlot } | { kind: "replay"; answer: KeptAnswer }> {
  const found = await findOrReserve(db, material, request);
  if (found.kind === "running") throw new ApiError(409, "idempotency_key_in_use");
  return found;
}

/**
 * How long a repeat waits for the first call under its key (`reserveKeyOrWait`), counted from when
 * the first began: a payment answers in well under a second, so one still running after this is
 * stuck or slow, and the repeat says so (409) rather than hold its caller longer. Below
 * `ABANDONED_AFTER_MS`, so a wait never ends in taking over a reservation that is still live.
 */
export const KEY_WAIT_MS = 25_000;

/**
 * As `reserveKey`, but a repeat of a request that is still running waits for it
 * instead of answering 409 `idempotency_key_in_use`: it replays the first's
 * answer once kept, and reserves the key itself if the first kept none (its
 * reservation was freed: it failed, and a retry runs again, as it would have
 * run had it come a moment later). Only a first call still running `KEY_WAIT_MS`
 * after it began (or after this one began, if the key changed hands meanwhile)
 * is 409 `idempotency_key_in_use`. For callers that cannot retry well on a
 * conflict: a model making several tool calls at once (src/mcp/paying.ts).
 */
export async function reserveKeyOrWait(
  db: D1Database,
  material: string,
  request: KeyedRequest,
): Promise<{ kind: "reserved"; slot: IdempotencySlot } | { kind: "replay"; answer: KeptAnswer }> {
  const began = Date.now();
  for (;;) {
    const found = await findOrReserve(db, material, request);
    if (found.kind !== "running") return found;
    faultPoint("idempotency.waiting");
    const deadline = Math.min(Date.parse(found.since), began) + KEY_WAIT_MS;
    const slot = { scope: request.scope, key: request.key, reservedAt: found.since };
    if (!(await reservationEnds(db, slot, deadline))) throw new ApiError(409, "idempotency_key_in_use");
  }
}

/**
 * Waits until the reservation `slot` names is no longer running (answered,
 * freed or taken over): true; false if it still runs at `deadline`. Reads with
 * a pause from 25 ms growing to 250 ms: a waiting Worker spends no CPU on a timer.
 */
async function reservationEnds(db: D1Database, slot: IdempotencySlot, deadline: number): Promise<boolean> {
  for (let pause = 25; Date.now() < deadline; pause = Math.min(pause * 2, 250)) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(pause, deadline - Date.now())));
    if (!(await reservationRunning(db, slot))) return true;
  }
  return false;
}

/** `reserveKey`'s work, with a running reservation reported (and when it was made) instead of refused. */
async function findOrReserve(
  db: D1Database,
  material: string,
  { scope, key, requestHash }: KeyedRequest,
): Promise<Found> {
  const now = Date.now();
  const reserved = await db
    .prepare(
      `INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at) VALUES (?, ?, ?, 'in_progress', ?, ?)
       ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, status = 'in_progress', response_status = NULL,
         response_body = NULL, response_content_type = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
       WHERE idempotency_keys.expires_at <= excluded.created_at
          OR (idempotency_keys.status = 'in_progress' AND idempotency_keys.request_hash = excluded.request_hash AND idempotency_keys.created_at <= ?)
       RETURNING key`,
    )
    .bind(scope, key, requestHash, nowIso(now), nowIso(now + IDEMPOTENCY_TTL_MS), nowIso(now - ABANDONED_AFTER_MS))
    .first();
  if (reserved) return { kind: "reserved", slot: { scope, key, reservedAt: nowIso(now) } };

  const row = await db
    .prepare(
      "SELECT request_hash AS requestHash, status, created_at AS createdAt, response_status AS responseStatus, response_body AS responseBody, response_content_type AS contentType FROM idempotency_keys WHERE scope = ? AND key = ?",
    )
    .bind(scope, key)
    .first<{
      requestHash: string;
      status: string;
      createdAt: string;
      responseStatus: number;
      responseBody: string;
      contentType: string | null;
    }>();
  // Freed between the two statements: as good as running (a waiter reads it again at once).
  if (!row) return { kind: "running", since: nowIso(now) };
  if (row.requestHash !== requestHash) throw new ApiError(409, "idempotency_key_reused");
  if (row.status !== "done") return { kind: "running", since: row.createdAt };
  return {
    kind: "replay",
    answer: {
      status: row.responseStatus,
      body: await storedText(material, row.responseBody),
      contentType: row.contentType,
    },
  };
}

/**
 * Runs the request that reserved `slot` and keeps its answer if it is final
 * (`isStoredAnswer`), encrypted at rest: a first response may carry a key
 * shown once. An answer already stored in its effect's batch is left as it
 * is. Anything else, a throw included, frees the key for a retry. Returns
 * what `run` answered.
 */
export async function keepAnswer<A extends RanAnswer>(
  db: D1Database,
  material: string,
  slot: IdempotencySlot,
  run: () => Promise<A>,
  /** Frees what else holds the key for this request (its claim in control) when no answer is kept. */
  alsoFree?: () => Promise<void>,
): Promise<A> {
  let stored = false;
  try {
    const answer = await run();
    // A crash here (after the effect, before the answer is stored afterwards) is what in-batch answers survive.
    faultPoint("idempotency.before_store");
    if (isStoredAnswer(answer.status)) {
      await storeAnswer(
        db,
        slot,
        answer.status,
        await encryptSecret(material, await answer.body()),
        answer.contentType,
      );
      stored = true;
    }
    return answer;
  } finally {
    // Nothing to replay: free the key for a retry.
    if (!stored) {
      await releaseReservation(db, slot);
      await alsoFree?.();
    }
  }
}
