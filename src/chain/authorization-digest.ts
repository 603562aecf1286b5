import { type Hex, keccak256, stringToHex } from "viem";
import { word } from "./abi-words";

/*
 * The EIP-712 digest of an EIP-3009 TransferWithAuthorization, laid out by hand: viem's typed-data
 * hashing parses the types, re-hashes the token's domain and walks every field generically on each
 * signature, which showed in the payouts' profile beside the signature itself. The domain's separator
 * is computed once per token; the struct is seven fixed words. test/chain/authorization-digest.test.ts
 * checks it against viem's hashTypedData.
 */

const DOMAIN_TYPEHASH = keccak256(
  stringToHex("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
);
const TRANSFER_TYPEHASH = keccak256(
  stringToHex(
    "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
  ),
);

/** The token's EIP-712 domain. */
export interface TokenDomain {
  name: string;
  version: string;
  chainId: number;
  verifyingContract: Hex;
}

/** An EIP-3009 `TransferWithAuthorization`: the fields its signer signs. */
export interface TransferAuthorization {
  from: Hex;
  to: Hex;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  /** 32 bytes, chosen by the signer: the token takes each (from, nonce) once. */
  nonce: Hex;
}

const separators = new Map<string, Hex>();

/** Keccak-256 of 32-byte words given as hex digits without their prefix. */
const hashWords = (...words: (string | null)[]): Hex => {
  if (words.some((w) => w === null)) throw new Error("a value does not fit a 32-byte word");
  return keccak256(`0x${words.join("")}`);
};

function domainSeparator(d: TokenDomain): Hex {
  const key = `${d.name}\u0000${d.version}\u0000${d.chainId}\u0000${d.verifyingContract.toLowerCase()}`;
  let separator = separators.get(key);
  if (!separator) {
    separator = hashWords(
      DOMAIN_TYPEHASH.slice(2),
      keccak256(stringToHex(d.name)).slice(2),
      keccak256(stringToHex(d.version)).slice(2),
      word(BigInt(d.chainId)),
      word(d.verifyingContract),
    );
    separators.set(key, separator);
  }
  return separator;
}

/** The digest a TransferWithAuthorization's signer signs: keccak256(0x1901 ‖ domain separator ‖ struct hash). */
export function transferAuthorizationDigest(domain: TokenDomain, m: TransferAuthorization): Hex {
  // Exact sizes: a shorter bytes32 would be padded on the other side by the ABI, a shorter address is no address.
  if (m.nonce.length !== 66 || m.from.length !== 42 || m.to.length !== 42 || domain.verifyingContract.length !== 42)
    throw new Error("an authorization's addresses are 20 bytes and its nonce 32");
  const struct = hashWords(
    TRANSFER_TYPEHASH.slice(2),
    word(m.from),
    word(m.to),
    word(m.value),
    word(m.validAfter),
    word(m.validBefore),
    word(m.nonce),
  );
  return keccak256(`0x1901${domainSeparator(domain).slice(2)}${struct.slice(2)}`);
}
