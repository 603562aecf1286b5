import { getAddress, type Hex, hashTypedData } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { transferAuthorizationDigest } from "../../src/chain/authorization-digest";
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/chain/client";

/* The hand-laid EIP-3009 digest against viem's typed-data hashing, on many random authorizations and domains. */

const random = (bytes: number): Hex =>
  `0x${Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("")}`;
const randomBig = (bytes: number) => BigInt(random(bytes));

const DOMAINS = [
  { name: "USDC", version: "2", chainId: 84532, verifyingContract: getAddress(random(20)) },
  { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: random(20) },
  { name: "Test Ünïcode ✓", version: "1.0.0", chainId: 31337, verifyingContract: random(20) },
];

const typed = (domain: (typeof DOMAINS)[number], message: Parameters<typeof transferAuthorizationDigest>[1]) => ({
  domain,
  types: TRANSFER_WITH_AUTHORIZATION_TYPES,
  primaryType: "TransferWithAuthorization" as const,
  message,
});

describe("an EIP-3009 authorization's digest, laid out by hand", () => {
  it("equals viem's hashTypedData for 300 random authorizations over three domains (each separator then cached)", () => {
    for (let k = 0; k < 300; k++) {
      const domain = DOMAINS[k % DOMAINS.length]!;
      const message = {
        from: k % 2 === 0 ? getAddress(random(20)) : random(20),
        to: random(20),
        value: k === 0 ? (1n << 256n) - 1n : randomBig(1 + (k % 32)),
        validAfter: k % 3 === 0 ? 0n : randomBig(4),
        validBefore: randomBig(8),
        nonce: random(32),
      };
      expect(transferAuthorizationDigest(domain, message)).toBe(hashTypedData(typed(domain, message)));
    }
  });

  it("signed, gives the signature viem's signTypedData gives (RFC 6979: the same bytes)", async () => {
    const account = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
    const domain = DOMAINS[0]!;
    const message = {
      from: account.address,
      to: random(20),
      value: 12_345n,
      validAfter: 0n,
      validBefore: 1_900_000_000n,
      nonce: random(32),
    };
    const byHand = await account.sign({ hash: transferAuthorizationDigest(domain, message) });
    expect(byHand).toBe(await account.signTypedData(typed(domain, message)));
  });

  it("refuses a nonce or an address of the wrong size, and a value past 256 bits, rather than hash another authorization", () => {
    const domain = DOMAINS[0]!;
    const good = { from: random(20), to: random(20), value: 1n, validAfter: 0n, validBefore: 2n, nonce: random(32) };
    for (const bad of [
      { ...good, nonce: random(31) },
      { ...good, from: random(19) },
      { ...good, to: random(21) },
      { ...good, value: 1n << 256n },
      { ...good, validBefore: -1n },
    ])
      expect(() => transferAuthorizationDigest(domain, bad)).toThrow();
  });
});
