import { isAddressEqual, verifyTypedData } from "viem";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../chain/client";
import type { X402Settings } from "../config/env";
import { screened } from "../kyt/screening";
import type { DecodedPayment } from "./payload";
import { caip2, type Terms } from "./terms";

export type VerifyResult =
  | { isValid: true; payer: `0x${string}` }
  | { isValid: false; invalidReason: string; payer: string | null };

/** Tolerated clock skew between us, the client and the chain. */
export const CLOCK_SKEW_SECONDS = 30;
/** A settlement needs a few seconds of validity left to land. */
export const MIN_REMAINING_SECONDS = 6;

const invalid = (invalidReason: string, payer: string | null = null): VerifyResult => ({
  isValid: false,
  invalidReason,
  payer,
});

/**
 * Everything that can be judged without the chain: shape, terms, window and, unless `signature` is
 * "left_to_chain", the signature (recovered here: the costliest step, about as much CPU as all the rest
 * of a settlement's own work).
 */
export async function verifyOffline(
  x: X402Settings,
  terms: Terms,
  payment: DecodedPayment,
  nowSeconds: number,
  signature: "recover" | "left_to_chain" = "recover",
): Promise<VerifyResult> {
  const a = payment.authorization;
  const payer = a.from;
  if (payment.scheme !== "exact") return invalid("unsupported_scheme", payer);
  const expectedNetwork = payment.version === 1 ? x.network : caip2(x.chainId);
  if (payment.network !== expectedNetwork) return invalid("invalid_network", payer);
  if (payment.accepted) {
    if (!isAddressEqual(payment.accepted.asset as `0x${string}`, x.asset)) return invalid("invalid_asset", payer);
    if (!isAddressEqual(payment.accepted.payTo as `0x${string}`, terms.payTo))
      return invalid("invalid_exact_evm_payload_recipient_mismatch", payer);
    if (payment.accepted.amount !== terms.value.toString())
      return invalid("invalid_exact_evm_payload_authorization_value", payer);
  }
  // The binding: `to` is signed, and only this charge's (or link's) terms name this address.
  if (!isAddressEqual(a.to as `0x${string}`, terms.payTo))
    return invalid("invalid_exact_evm_payload_recipient_mismatch", payer);
  if (BigInt(a.value) !== terms.value) return invalid("invalid_exact_evm_payload_authorization_value", payer);
  const validAfter = BigInt(a.validAfter);
  const validBefore = BigInt(a.validBefore);
  const now = BigInt(nowSeconds);
  if (validBefore < now + BigInt(MIN_REMAINING_SECONDS))
    return invalid("invalid_exact_evm_payload_authorization_valid_before", payer);
  if (validAfter > now + BigInt(CLOCK_SKEW_SECONDS))
    return invalid("invalid_exact_evm_payload_authorization_valid_after", payer);
  // As the reference facilitator, any window is taken, not only the advertised maxTimeoutSeconds: up to the
  // longest the service keeps a reservation for (X402_MAX_AUTHORIZATION_SECONDS).
  if (validBefore > now + BigInt(x.maxAuthorizationSeconds + CLOCK_SKEW_SECONDS))
    return invalid("invalid_exact_evm_payload_authorization_window_too_long", payer);
  // The transfer's dry run on chain, which runs before anything is reserved, checks it as the token does.
  if (signature === "left_to_chain") return { isValid: true, payer: a.from as `0x${string}` };
  let signed = false;
  try {
    signed = await verifyTypedData({
      address: a.from as `0x${string}`,
      domain: { name: x.assetName, version: x.assetVersion, chainId: x.chainId, verifyingContract: x.asset },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message: {
        from: a.from as `0x${string}`,
        to: a.to as `0x${string}`,
        value: BigInt(a.value),
        validAfter,
        validBefore,
        nonce: a.nonce as `0x${string}`,
      },
      signature: payment.signature,
    });
  } catch {
    signed = false;
  }
  if (!signed) return invalid("invalid_exact_evm_payload_signature", payer);
  return { isValid: true, payer: a.from as `0x${string}` };
}

/**
 * The checks before anything is reserved: the offline ones, then the payer's screening (`onBlocklist`
 * was read with the service's other lookups). The chain's part (nonce unused, balance, the transfer
 * runs) is the facilitator's verification (`checkTransfer`); when that dry run checks the signature
 * (`signature` "left_to_chain"), it is not recovered here as well.
 */
export async function verifyPayment(
  x: X402Settings,
  terms: Terms,
  payment: DecodedPayment,
  nowSeconds: number,
  onBlocklist: boolean,
  /** The offline checks of this same payment, when the caller already ran them (the signature recovery is the costly part). */
  checked?: VerifyResult,
  signature: "recover" | "left_to_chain" = "recover",
): Promise<VerifyResult> {
  const offline = checked ?? (await verifyOffline(x, terms, payment, nowSeconds, signature));
  if (!offline.isValid) return offline;
  if (screened(offline.payer, onBlocklist).verdict !== "pass") return invalid("payer_blocked", offline.payer);
  return offline;
}
