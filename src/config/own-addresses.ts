import { type Hex, isAddressEqual } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import type { Settings } from "./settings";

const known = new WeakMap<Settings, readonly Hex[]>();

/**
 * The addresses money must never be sent to, by a payout or by an agent's x402 payment: the service's
 * own (the settlement address, every gas key's, the settlement batch and audit anchor contracts) and
 * the token's. Paid to the settlement address, a transfer leaves nothing; to a contract or the token,
 * tokens sent are lost for good (neither can send them back); to a gas key, they would mix with the gas
 * the service spends. Derived once per settings (a key's address is a curve multiplication).
 */
export function ownAddresses(settings: Settings): readonly Hex[] {
  let own = known.get(settings);
  if (!own) {
    const x = settings.x402;
    const anchor = settings.auditAnchor ? [settings.auditAnchor] : [];
    own = x
      ? [
          x.payTo,
          x.asset,
          ...(x.settlementBatch ? [x.settlementBatch.address] : []),
          ...anchor,
          ...x.facilitatorPrivateKeys.map((key) => privateKeyToAddress(key)),
        ]
      : anchor;
    known.set(settings, own);
  }
  return own;
}

export const isOwnAddress = (settings: Settings, address: string) =>
  ownAddresses(settings).some((own) => isAddressEqual(own, address as Hex));
