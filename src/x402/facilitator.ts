import type { Hex } from "viem";
import { receiptWithin, shortError } from "../chain/client";
import type { Env, X402Settings } from "../config/env";
import type { DecodedPayment } from "./payload";
import { laneOf } from "./settler.do";
import type { Terms } from "./terms";
import { checkTransfer, gasAccountOf, type PreparedTransfer, type SettleOutcome, type TransferCheck } from "./transfer";

export type FacilitatorVerify =
  /** `seenBlock`: the head at which our own chain check found the authorization unused, when it ran. */
  | { isValid: true; seenBlock?: number | null }
  | { isValid: false; invalidReason: string }
  /** The chain (or the remote facilitator) could not be asked: nothing is decided and nothing was reserved; the payer may send the same payment again. */
  | { isValid: false; unavailable: "chain_unavailable" | "facilitator_unavailable"; reason: string };

/** Verification and settlement behind one interface, built-in or remote. */
export interface Facilitator {
  /**
   * True when `verify` itself proves the payer's signature the way the token will (the built-in one's
   * dry run of the transfer on chain), so the service need not recover it first. Absent: it is recovered.
   */
  checksSignature?: boolean;
  verify(payment: DecodedPayment, terms: Terms): Promise<FacilitatorVerify>;
  settle(payment: DecodedPayment, terms: Terms): Promise<SettleOutcome>;
}

/** Settlements are spread over the gas keys in turn (per isolate; isolates start at different points). */
let nextLane = Math.floor(Math.random() * 1024);

/**
 * Lanes whose last send failed (a key out of gas, a node refusing it), by gas address, and until when
 * this isolate passes them over: each failure is a payment left pending until reconciliation, so a
 * broken lane should not keep getting its share. When every lane is resting they take turns anyway.
 */
const resting = new Map<string, number>();
const LANE_REST_MS = 30_000;

/** Settlements this isolate has handed to each lane and not yet had answered, when batching. */
const inBatches = new Map<string, number>();

/**
 * With batching, lanes are filled in order rather than taken in turn: the first lane not resting
 * with room for one more in its batch (fewer than `max` of this isolate's settlements waiting there),
 * so settlements gather into few, full transactions; the next lane takes the overflow.
 */
export function fillLane(
  lanes: `0x${string}`[],
  now: number,
  max: number,
  state: { resting: ReadonlyMap<string, number>; inBatches: ReadonlyMap<string, number> } = { resting, inBatches },
): `0x${string}` {
  const load = (lane: string) => state.inBatches.get(lane) ?? 0;
  const open = lanes.filter((lane) => (state.resting.get(lane) ?? 0) <= now);
  const candidates = open.length > 0 ? open : lanes;
  const roomy = candidates.find((lane) => load(lane) < max);
  if (roomy) return roomy;
  return candidates.reduce((least, lane) => (load(lane) < load(least) ? lane : least));
}

function pickLane(lanes: `0x${string}`[], now: number): `0x${string}` {
  for (let tried = 0; tried < lanes.length; tried++) {
    const lane = lanes[nextLane++ % lanes.length]!;
    if ((resting.get(lane) ?? 0) <= now) return lane;
  }
  return lanes[nextLane++ % lanes.length]!;
}

/**
 * The lane's object failed while it held the settlement (it crashed or was reset, the call was
 * lost): whether it sent is not known here, so the chain decides (reconciliation).
 */
const laneLost = (error: unknown): SettleOutcome => ({
  kind: "unknown",
  reason: `settler_unreachable: ${shortError(error)}`,
  transaction: null,
});

/** A lane whose send failed rests; one that sent is in turn again. */
function laneAnswered(gasAddress: `0x${string}`, sent: boolean): void {
  if (sent) resting.delete(gasAddress);
  else resting.set(gasAddress, Date.now() + LANE_REST_MS);
}

/** What a chain check that did not pass answers as verification: refused, or not decided at all. */
function chainRefusal(check: Exclude<TransferCheck, { kind: "valid" }>): FacilitatorVerify {
  return check.kind === "unavailable"
    ? { isValid: false, unavailable: "chain_unavailable", reason: check.reason }
    : { isValid: false, invalidReason: check.reason };
}

/**
 * Ours. Verification is the chain's part of the checks (`checkTransfer`: nonce unused, balance,
 * and the transfer runs, in one JSON-RPC batch); settlement hands the transfer so checked to the
 * settler, which signs it with the next nonce of the gas-paying key and broadcasts it, and waits
 * for the receipt.
 */
export function builtInFacilitator(env: Env, x: X402Settings): Facilitator {
  const lanes = x.facilitatorPrivateKeys.map((key) => gasAccountOf(key).address);
  // Any key's estimate is every key's: the transfer does not depend on who sends it.
  const gasFrom = lanes[0] ?? null;
  /** The transfer `verify` checked, for `settle` of the same payment. */
  let checked: { payment: DecodedPayment; prepared: PreparedTransfer } | null = null;
  return {
    // The gas estimate executes transferWithAuthorization, whose own check (ecrecover against `from`)
    // refuses a forged signature before anything is reserved. Without a gas key there is no estimate.
    checksSignature: gasFrom !== null,
    async verify(payment, terms) {
      const check = await checkTransfer(x, terms, payment, gasFrom);
      if (check.kind !== "valid") return chainRefusal(check);
      if (check.prepared) checked = { payment, prepared: check.prepared };
      return { isValid: true, seenBlock: check.block };
    },
    async settle(payment, terms) {
      if (!gasFrom) return { kind: "failed", reason: "facilitator_not_configured" };
      let prepared = checked?.payment === payment ? checked.prepared : null;
      if (!prepared) {
        const check = await checkTransfer(x, terms, payment, gasFrom);
        if (check.kind !== "valid" || !check.prepared)
          return { kind: "failed", reason: check.kind === "valid" ? "simulation_failed" : check.reason };
        prepared = check.prepared;
      }
      if (x.settlementBatch) {
        const gasAddress = fillLane(lanes, Date.now(), x.settlementBatch.max);
        const a = payment.authorization;
        inBatches.set(gasAddress, (inBatches.get(gasAddress) ?? 0) + 1);
        const outcome = await laneOf(env, gasAddress)
          .settleInBatch({ ...prepared, from: a.from as Hex, nonce: a.nonce as Hex }, gasAddress)
          .catch((error: unknown) => laneLost(error))
          .finally(() => inBatches.set(gasAddress, (inBatches.get(gasAddress) ?? 1) - 1));
        // A call that failed inside a mined batch is the payment's failure, not the lane's.
        laneAnswered(
          gasAddress,
          outcome.kind === "settled" ||
            (outcome.kind === "failed" && outcome.reason.startsWith("transaction_reverted")),
        );
        return outcome;
      }
      const gasAddress = pickLane(lanes, Date.now());
      let sent: Awaited<ReturnType<ReturnType<typeof laneOf>["broadcast"]>>;
      try {
        sent = await laneOf(env, gasAddress).broadcast(prepared, gasAddress);
      } catch (error) {
        laneAnswered(gasAddress, false);
        return laneLost(error);
      }
      laneAnswered(gasAddress, sent.kind === "sent");
      if (sent.kind === "rejected") return { kind: "failed", reason: sent.reason };
      if (sent.kind === "unknown") return { kind: "unknown", reason: sent.reason, transaction: null };
      try {
        const receipt = await receiptWithin(x, sent.transaction, x.facilitatorTimeoutMs);
        return receipt.status === "success"
          ? { kind: "settled", transaction: sent.transaction }
          : { kind: "failed", reason: "transaction_reverted" };
      } catch (error) {
        return { kind: "unknown", reason: `receipt_unavailable: ${shortError(error)}`, transaction: sent.transaction };
      }
    },
  };
}

/** A facilitator speaking the standard HTTP API (`POST /verify`, `POST /settle`). */
export function remoteFacilitator(x: X402Settings, baseUrl: string): Facilitator {
  const call = async (path: "verify" | "settle", payment: DecodedPayment, terms: Terms) => {
    const response = await fetch(new URL(path, baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`), {
      method: "POST",
      headers: { "content-type": "application/json", ...x.facilitatorHeaders },
      body: JSON.stringify({
        x402Version: payment.version,
        paymentPayload: payment.raw,
        // Always our own stored requirements, never the client's copy.
        paymentRequirements: payment.version === 1 ? terms.v1 : terms.v2,
      }),
      signal: AbortSignal.timeout(x.facilitatorTimeoutMs),
    });
    const body = (await response.json().catch(() => null)) as Record<string, unknown> | null;
    return { ok: response.ok, body: body && typeof body === "object" ? body : {} };
  };
  return {
    async verify(payment, terms) {
      // Our own reading of the chain first (nonce unused, balance), as for the built-in one.
      const check = await checkTransfer(x, terms, payment, null);
      if (check.kind !== "valid") return chainRefusal(check);
      try {
        const { ok, body } = await call("verify", payment, terms);
        // An answer about the payment carries isValid (the reference client reads it from a non-2xx reply too).
        if (typeof body.isValid !== "boolean")
          return {
            isValid: false,
            unavailable: "facilitator_unavailable",
            reason: `verify answered ${ok ? "without isValid" : "an HTTP error"}`,
          };
        return body.isValid
          ? { isValid: true, seenBlock: check.block }
          : { isValid: false, invalidReason: String(body.invalidReason ?? "facilitator_rejected") };
      } catch (error) {
        // Not an answer about the payment: nothing was reserved, and the same payment may be sent again.
        return { isValid: false, unavailable: "facilitator_unavailable", reason: shortError(error) };
      }
    },
    async settle(payment, terms) {
      let answer: { ok: boolean; body: Record<string, unknown> };
      try {
        answer = await call("settle", payment, terms);
      } catch (error) {
        // A timeout after the request left says nothing about whether it broadcast.
        return { kind: "unknown", reason: `facilitator_timeout: ${shortError(error)}`, transaction: null };
      }
      const { ok, body } = answer;
      const transaction =
        typeof body.transaction === "string" && /^0x[0-9a-fA-F]{64}$/.test(body.transaction)
          ? (body.transaction as `0x${string}`)
          : null;
      const reason = String(body.errorReason ?? "settle_failed");
      if (body.success === true && transaction) return { kind: "settled", transaction };
      // No settle reply at all (a gateway's 504, a body without success): it may have broadcast.
      if (typeof body.success !== "boolean")
        return {
          kind: "unknown",
          reason: `facilitator_error: ${ok ? "a 2xx" : "an HTTP error"} without a settle reply`,
          transaction,
        };
      // Broadcast but unconfirmed, a failure it cannot explain, or one with a hash: it may have moved money.
      if (transaction || reason === "settlement_pending" || reason === "unexpected_settle_error")
        return { kind: "unknown", reason, transaction };
      return { kind: "failed", reason };
    },
  };
}

export function facilitatorOf(env: Env, x: X402Settings): Facilitator {
  return x.facilitatorUrl ? remoteFacilitator(x, x.facilitatorUrl) : builtInFacilitator(env, x);
}
