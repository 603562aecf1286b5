import { type Hex, isAddressEqual } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import type { Settings } from "../config/env";

/**
 * The addresses a payout must never go to: the service's own (the settlement address, every gas key's,
 * the settlement batch and audit anchor contracts) and the token's. Paid to the settlement address a
 * payout leaves nothing; to a contract or the token, tokens sent are lost for good (neither can send
 * them back); to a gas key, they would mix with the gas the service spends.
 */
export function ownAddresses(settings: Settings): Hex[] {
  const x = settings.x402;
  if (!x) return settings.auditAnchor ? [settings.auditAnchor] : [];
  return [
    x.payTo,
    x.asset,
    ...(x.settlementBatch ? [x.settlementBatch.address] : []),
    ...(settings.auditAnchor ? [settings.auditAnchor] : []),
    ...x.facilitatorPrivateKeys.map((key) => privateKeyToAddress(key)),
  ];
}

export const isOwnAddress = (settings: Settings, address: string) =>
  ownAddresses(settings).some((own) => isAddressEqual(own, address as Hex));
