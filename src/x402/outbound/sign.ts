import { type Hex, toHex } from "viem";
import type { SignedX402Payment } from "../../agents/x402-pay";
import type { X402Settings } from "../../config/env";
import { gasAccountOf } from "../transfer";
import { authorizationFor, paymentHeader, signTransferAuthorization } from "./authorization";
import type { PayableTerms } from "./choice";
import { type AcceptsEntry, isHttpUrl, type PaymentRequired } from "./request";

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
): Promise<Omit<SignedX402Payment, "recordedBlock">> {
  const account = gasAccountOf(key);
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
  const authorization = authorizationFor(p.terms, account.address, nowSeconds, nonce);
  const signature = await signTransferAuthorization(account, p.terms, x.chainId, authorization);
  return {
    resource: p.resource,
    alsoNamed: urlsNamedIn(p.paymentRequired, p.entry),
    payTo: p.terms.payTo,
    network: p.terms.network,
    asset: p.terms.asset,
    amountBaseUnits: p.terms.value,
    nonce,
    validBefore: Number(authorization.validBefore),
    header: paymentHeader(p.paymentRequired, p.entry, authorization, signature),
  };
}

/**
 * The URLs the terms name beside the one the agent handed over: a version 2 answer's `resource.url`,
 * and the chosen entry's `resource` when it is a URL. The agent's allowed hosts must cover each, so
 * terms copied from one paywall cannot be paid under another's name.
 */
export function urlsNamedIn(paymentRequired: PaymentRequired, entry: AcceptsEntry): string[] {
  const named = paymentRequired.x402Version === 2 ? [paymentRequired.resource.url] : [];
  if (typeof entry.resource === "string" && isHttpUrl(entry.resource)) named.push(entry.resource);
  return named;
}
