import type { ChargeView } from "../charges/service";
import type { Terms } from "./terms";

/** Outcomes of an x402 request; routes.ts maps each to a response. */
export type X402Outcome =
  | { kind: "terms"; terms: Terms }
  | { kind: "already_paid"; charge: ChargeView }
  | { kind: "settled"; settlementId: string; chargeId: string; transaction: string; payer: string }
  | { kind: "pending"; settlementId: string; chargeId: string; transaction: string | null; payer: string }
  | { kind: "invalid"; reason: string; terms: Terms }
  | { kind: "settle_failed"; reason: string; terms: Terms; payer: string }
  /** The chain or the remote facilitator could not be asked before anything was reserved: nothing happened, the same payment may be sent again. */
  | { kind: "unavailable"; error: "chain_unavailable" | "facilitator_unavailable"; reason: string }
  | { kind: "charge_not_found" }
  /** A charge only its own facilitated payment may pay (see closedToOthers). */
  | { kind: "not_payable" };
