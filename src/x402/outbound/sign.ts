import { type Hex, toHex } from "viem";
import type { X402Settings } from "../../config/env";
import { gasAccountOf } from "../transfer";
import { authorizationFor, type PaymentHeader, paymentHeader, transferTypedData } from "./authorization";
import type { PayableTerms } from "./choice";
import type { AcceptsEntry, PaymentRequired } from "./request";

/** An outbound payment signed, before the wallet decides on it: what its batch records, and the header. */
export interface SignedOutbound {
  resource: string;
  payTo: string;
  network: string;
  asset: string;
  amountBaseUnits: bigint;
  nonce: Hex;
  validBefore: number;
  header: PaymentHeader;
}

/**
 * Signs the EIP-3009 authorization for the chosen entry from the settlement address (`key`), with
 * 32 random bytes as its nonce: one payment, one signature. Signed before the wallet decides; the
 * signature reaches no one unless the wallet's batch commits it.
 */
export async function signOutbound(
  x: X402Settings,
  key: Hex,
  p: { resource: string; paymentRequired: PaymentRequired; entry: AcceptsEntry; terms: PayableTerms },
  nowSeconds: number,
): Promise<SignedOutbound> {
  const account = gasAccountOf(key);
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
  const authorization = authorizationFor(p.terms, account.address, nowSeconds, nonce);
  const signature = await account.signTypedData(transferTypedData(p.terms, x.chainId, authorization));
  return {
    resource: p.resource,
    payTo: p.terms.payTo,
    network: p.terms.network,
    asset: p.terms.asset,
    amountBaseUnits: p.terms.value,
    nonce,
    validBefore: Number(authorization.validBefore),
    header: paymentHeader(p.paymentRequired, p.entry, authorization, signature),
  };
}
