import type { Hex } from "viem";

/*
 * The two calls every settlement encodes, laid out by hand: viem's general encoder walks the ABI,
 * checks each address's checksum and copies every word through several representations, which
 * showed in the settle path's profile. Both layouts are fixed (test/chain/abi-words.test.ts checks
 * them against viem's encoder).
 */

const WORD_MAX = (1n << 256n) - 1n;

/** One 32-byte word: an unsigned integer, or a hex value of at most 32 bytes left-padded. Null when it does not fit. */
export function word(value: bigint | Hex): string | null {
  if (typeof value === "bigint") return value < 0n || value > WORD_MAX ? null : value.toString(16).padStart(64, "0");
  const digits = value.slice(2);
  return digits.length > 64 || !/^[0-9a-fA-F]*$/.test(digits) ? null : digits.toLowerCase().padStart(64, "0");
}

/** A call whose arguments are all static (addresses, integers, bytes32): the selector and one word each. */
export function staticCall(selector: Hex, args: (bigint | Hex)[]): Hex | null {
  let data: string = selector;
  for (const arg of args) {
    const w = word(arg);
    if (w === null) return null;
    data += w;
  }
  return data as Hex;
}

/** A call of `(address, bytes[])`: the address, the array's offset, its length, each element's offset, then each element padded. */
export function addressAndBytesArrayCall(selector: Hex, address: Hex, items: Hex[]): Hex | null {
  const head = word(address);
  if (head === null) return null;
  const offsets: string[] = [];
  const tails: string[] = [];
  // Element offsets count from the start of the offsets themselves (after the array's length word).
  let at = items.length * 32;
  for (const item of items) {
    const bytes = item.slice(2);
    if (bytes.length % 2 !== 0) return null;
    const padded = bytes.padEnd(Math.ceil(bytes.length / 64) * 64, "0");
    offsets.push(word(BigInt(at))!);
    tails.push(word(BigInt(bytes.length / 2))! + padded.toLowerCase());
    at += 32 + padded.length / 2;
  }
  return `${selector}${head}${word(64n)}${word(BigInt(items.length))}${offsets.join("")}${tails.join("")}` as Hex;
}
