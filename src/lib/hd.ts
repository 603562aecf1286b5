import { mnemonicToSeedSync } from "@scure/bip39";
import { toHex } from "viem";
import { HDKey, privateKeyToAddress } from "viem/accounts";

/** Roots by mnemonic: the seed (2,048 PBKDF2 rounds) is derived once per isolate. */
const roots = new Map<string, HDKey>();
/** Branch nodes m/44'/60'/<account>'/0 by account and mnemonic, so an address costs one child derivation. */
const branches = new Map<string, HDKey>();

function branchOf(mnemonic: string, account: number): HDKey {
  const key = `${account} ${mnemonic}`;
  let branch = branches.get(key);
  if (!branch) {
    let root = roots.get(mnemonic);
    if (!root) {
      root = HDKey.fromMasterSeed(mnemonicToSeedSync(mnemonic));
      roots.set(mnemonic, root);
    }
    branch = root.derive(`m/44'/60'/${account}'/0`);
    branches.set(key, branch);
  }
  return branch;
}

/**
 * The address at BIP-44 path m/44'/60'/<account>'/0/<index> of `mnemonic`: what any HD wallet
 * shows for that path, so each key can be recovered from the mnemonic and its index alone.
 */
export function hdAddressAt(mnemonic: string, account: number, index: number): `0x${string}` {
  return privateKeyToAddress(hdPrivateKeyAt(mnemonic, account, index));
}

/** The private key at that path: what the service signs with to move tokens off one of its addresses. */
export function hdPrivateKeyAt(mnemonic: string, account: number, index: number): `0x${string}` {
  return toHex(branchOf(mnemonic, account).deriveChild(index).privateKey!);
}
