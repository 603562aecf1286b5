/**
 * A narrow seam for fault-injection tests. Production code calls
 * `faultPoint(name)` at the steps where a crash matters; no hook is installed
 * outside tests, so it is a no-op there. A test installs a hook that throws
 * (or aborts a Durable Object) at one point, then checks that nothing is
 * half-applied and that a retry ends in exactly one effect.
 */
export type FaultPoint =
  | "payment.before_commit"
  | "payment.after_commit"
  | "transfer.after_send"
  | "transfer.after_arrive"
  | "transfer.after_refusal"
  | "transfer.before_settle"
  | "ledger.before_batch"
  | "ledger.after_batch"
  | "draw.before_wallet"
  | "draw.after_commit"
  | "delivery.before_post"
  | "delivery.after_post"
  | "outbox.after_forward"
  | "idempotency.before_store"
  /** Not a crash: a repeat begins to wait for the first call under its key (tests see that it waits). */
  | "idempotency.waiting"
  | "outbound.before_send"
  | "outbound.after_send"
  | "checkpoint.before_send"
  | "checkpoint.after_send"
  | "settle.before_send"
  | "settle.after_send"
  | "archive.after_write"
  | "archive.after_verify"
  | "archive.during_delete";

export interface FaultContext {
  /** Present inside a Durable Object: ends the object as a crash would. */
  abort?: () => void;
}

type FaultHook = (point: FaultPoint, context: FaultContext) => void;

let hook: FaultHook | null = null;

/** Tests only. */
export function setFaultHook(next: FaultHook | null): void {
  hook = next;
}

export function faultPoint(point: FaultPoint, context: FaultContext = {}): void {
  if (hook) hook(point, context);
}
