import { type ChargeRow, chargeRowStatement } from "../charges/service";
import type { Env, X402Settings } from "../config/env";
import { blocklistStatement } from "../kyt/screening";
import { type Place, placementOf } from "../ledger/place";
import { identifiedStatement, type PaymentRow, paymentStatement } from "./earlier-payments";
import type { DecodedPayment } from "./payload";
import { type ReceivingRow, receivingAddressStatement } from "./receiving";
import { ownerIdOf, type X402Target, type X402TargetRef } from "./target";

/** What a payment request reads before its checks. */
export interface LookedUp {
  /** The target, or null when the charge named by id does not exist. */
  target: X402Target | null;
  receiving: ReceivingRow | null;
  earlier: PaymentRow | null;
  identified: PaymentRow | null;
  onBlocklist: boolean;
}

/**
 * Everything read before the checks, in one round trip per database: the charge when the target
 * names it by id (null when there is none), an earlier payment with this authorization and one
 * with its payment identifier (all three where the target lives, `where`), the target's receiving
 * address (unless the caller holds it) and whether the payer is on the operators' blocklist (both
 * in control). With one shard, or a target living in control, that is one batch, as it always
 * was. A payment that did not decode reads the charge and its address alone.
 */
export async function lookUp(
  env: Env,
  x: X402Settings,
  where: Place,
  ref: X402TargetRef,
  payment: DecodedPayment | null,
  /** The target's receiving address when the caller already holds it: it is not read again. */
  knownReceiving: ReceivingRow | null = null,
): Promise<LookedUp> {
  const ownerId = ownerIdOf(ref);
  const { db } = where;
  const control = placementOf(env).control.db;
  const atTarget = [
    ...(ref.kind === "charge_id" ? [chargeRowStatement(db, ref.chargeId)] : []),
    ...(payment ? [paymentStatement(db, x, payment)] : []),
    ...(payment?.paymentIdentifier ? [identifiedStatement(db, payment)] : []),
  ];
  const inControl = [
    ...(knownReceiving ? [] : [receivingAddressStatement(control, ownerId)]),
    ...(payment ? [blocklistStatement(control, payment.authorization.from)] : []),
  ];
  let targetResults: D1Result<Record<string, unknown>>[];
  let controlResults: D1Result<Record<string, unknown>>[];
  if (where.isControl) {
    const statements = [...atTarget, ...inControl];
    const all = statements.length > 0 ? await control.batch<Record<string, unknown>>(statements) : [];
    targetResults = all.slice(0, atTarget.length);
    controlResults = all.slice(atTarget.length);
  } else {
    [targetResults, controlResults] = await Promise.all([
      atTarget.length > 0 ? db.batch<Record<string, unknown>>(atTarget) : Promise.resolve([]),
      inControl.length > 0 ? control.batch<Record<string, unknown>>(inControl) : Promise.resolve([]),
    ]);
  }
  const [charge, earlier, identified] = ref.kind === "charge_id" ? targetResults : [undefined, ...targetResults];
  const [receiving, listed] = knownReceiving ? [undefined, ...controlResults] : controlResults;
  const target: X402Target | null =
    ref.kind !== "charge_id"
      ? ref
      : charge?.results[0]
        ? { kind: "charge", charge: charge.results[0] as ChargeRow }
        : null;
  return {
    target,
    receiving: knownReceiving ?? (receiving?.results[0] as ReceivingRow | undefined) ?? null,
    earlier: (earlier?.results[0] as PaymentRow | undefined) ?? null,
    identified: (identified?.results[0] as PaymentRow | undefined) ?? null,
    onBlocklist: (listed?.results.length ?? 0) > 0,
  };
}
