import type { Hex } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { type TransferAuthorization, transferAuthorizationDigest } from "../../chain/authorization-digest";
import { base64Json } from "../terms";
import type { AcceptsEntry, PaymentRequired } from "./request";

/** What the typed data is built from: the chosen terms (choice.ts `PayableTerms`) and the chain. */
export interface AuthorizationTerms {
  asset: Hex;
  payTo: Hex;
  value: bigint;
  maxTimeoutSeconds: number;
  domain: { name: string; version: string };
}

/**
 * The authorization for `terms` from `from`: exactly the amount, to the entry's `payTo`, valid from
 * time 0 (as the official version 2 client signs) until `nowSeconds + maxTimeoutSeconds`.
 */
export function authorizationFor(
  terms: AuthorizationTerms,
  from: Hex,
  nowSeconds: number,
  nonce: Hex,
): TransferAuthorization {
  return {
    from,
    to: terms.payTo,
    value: terms.value,
    validAfter: 0n,
    validBefore: BigInt(nowSeconds + terms.maxTimeoutSeconds),
    nonce,
  };
}

/**
 * `authorization` signed by `account` as the token checks it: the EIP-712 digest on chain `chainId`,
 * in the token's domain with the token as verifying contract.
 */
export function signTransferAuthorization(
  account: Pick<PrivateKeyAccount, "sign">,
  terms: Pick<AuthorizationTerms, "asset" | "domain">,
  chainId: number,
  authorization: TransferAuthorization,
): Promise<Hex> {
  const domain = { name: terms.domain.name, version: terms.domain.version, chainId, verifyingContract: terms.asset };
  return account.sign({ hash: transferAuthorizationDigest(domain, authorization) });
}

/** The authorization as x402 payloads carry it: every number a decimal string. */
const wireAuthorization = (a: TransferAuthorization) => ({
  from: a.from,
  to: a.to,
  value: a.value.toString(),
  validAfter: a.validAfter.toString(),
  validBefore: a.validBefore.toString(),
  nonce: a.nonce,
});

/** The header an agent sends with its request again. */
export interface PaymentHeader {
  name: "X-PAYMENT" | "PAYMENT-SIGNATURE";
  value: string;
}

/**
 * The signed payment as the paywall expects it: version 1 `X-PAYMENT`, base64 of `{ x402Version: 1,
 * scheme, network, payload }`; version 2 `PAYMENT-SIGNATURE`, base64 of `{ x402Version: 2, payload,
 * extensions?, resource, accepted }`, where `accepted` is the chosen entry exactly as the 402 listed
 * it (sellers compare it whole with their own) and `resource` and `extensions` are the 402's, as the
 * official client repeats them. Standard base64 of UTF-8 JSON, as the official clients send.
 */
export function paymentHeader(
  paymentRequired: PaymentRequired,
  entry: AcceptsEntry,
  authorization: TransferAuthorization,
  signature: Hex,
): PaymentHeader {
  const payload = { signature, authorization: wireAuthorization(authorization) };
  if (paymentRequired.x402Version === 1) {
    return {
      name: "X-PAYMENT",
      value: base64Json({ x402Version: 1, scheme: entry.scheme, network: entry.network, payload }),
    };
  }
  const { extensions, resource } = paymentRequired;
  return {
    name: "PAYMENT-SIGNATURE",
    value: base64Json({ x402Version: 2, payload, ...(extensions ? { extensions } : {}), resource, accepted: entry }),
  };
}
