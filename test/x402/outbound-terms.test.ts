import { decodePaymentSignatureHeader } from "@x402/core/http";
import { getAddress, type Hex, isAddressEqual } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { PaymentPayloadSchema } from "x402/types";
import { authorizationFor, paymentHeader, signTransferAuthorization } from "../../src/x402/outbound/authorization";
import { choosePayableEntry, type OutboundChain, overMaxAmount } from "../../src/x402/outbound/choice";
import {
  MAX_ACCEPTS,
  MAX_OUTBOUND_BASE_UNITS,
  OutboundPaymentRequest,
  type PaymentRequired,
} from "../../src/x402/outbound/request";
import { decodePaymentHeader } from "../../src/x402/payload";
import { signerOfAuthorization } from "../helpers/x402";

/*
 * The pure edge of agents' outbound x402 payments: the request's limits, the choice of the entry
 * the service pays, and the payment it builds, read back by the official packages' decoders and by
 * the service's own.
 */

const CHAIN: OutboundChain = {
  network: "base-sepolia",
  chainId: 84532,
  asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
  assetName: "USDC",
  assetVersion: "2",
};
const PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
// A test key (anvil's account 1): signs as the settlement address would.
const SIGNER = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
const NONCE = `0x${"ab".repeat(32)}` as Hex;
const NOW = 1_800_000_000;

const v2Entry = (over: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: "eip155:84532",
  amount: "1000",
  asset: CHAIN.asset,
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: "USDC", version: "2" },
  ...over,
});
const v1Entry = (over: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: "base-sepolia",
  maxAmountRequired: "50000",
  resource: "https://api.example/report",
  description: "One report",
  mimeType: "application/json",
  asset: CHAIN.asset,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { name: "USDC", version: "2" },
  ...over,
});
const solanaEntry = {
  scheme: "exact",
  network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  amount: "1000",
  asset: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
  payTo: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin",
  maxTimeoutSeconds: 60,
};

const request = (paymentRequired: unknown, more: Record<string, unknown> = {}) =>
  OutboundPaymentRequest.safeParse({ resource: "https://api.example/report", paymentRequired, ...more });
const v2Required = (accepts: unknown[]) => ({
  x402Version: 2,
  resource: { url: "https://api.example/report", description: "One report", mimeType: "application/json" },
  accepts,
});
/** The choice for a request that must parse. */
const choiceOf = (paymentRequired: unknown, chain: OutboundChain = CHAIN) => {
  const parsed = request(paymentRequired);
  expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
  return choosePayableEntry(chain, parsed.data!.paymentRequired);
};

describe("the outbound payment request's limits", () => {
  it("takes a version 1 body and a decoded version 2 PAYMENT-REQUIRED", () => {
    expect(request({ x402Version: 1, error: "X-PAYMENT header is required", accepts: [v1Entry()] }).success).toBe(true);
    expect(request(v2Required([v2Entry()]), { maxAmountBaseUnits: "1000" }).success).toBe(true);
  });

  it.each([
    ["a relative URL", "/report"],
    ["a non-http URL", "ftp://api.example/report"],
    ["a javascript URL", "javascript:alert(1)"],
    ["no URL", ""],
    ["an over-long URL", `https://api.example/${"a".repeat(2100)}`],
  ])("refuses %s as resource", (_, resource) => {
    expect(request(v2Required([v2Entry()]), { resource }).success).toBe(false);
  });

  it("refuses a thousand entries, and takes the most it allows", () => {
    expect(request(v2Required(Array.from({ length: 1000 }, () => v2Entry()))).success).toBe(false);
    expect(request(v2Required(Array.from({ length: MAX_ACCEPTS + 1 }, () => v2Entry()))).success).toBe(false);
    expect(request(v2Required(Array.from({ length: MAX_ACCEPTS }, () => v2Entry()))).success).toBe(true);
    expect(request(v2Required([])).success).toBe(false);
  });

  it.each([["-1"], ["0"], ["1.5"], ["1e6"], ["+5"], ["abc"], [" 5"], [String(MAX_OUTBOUND_BASE_UNITS + 1n)], [""]])(
    "refuses %j as maxAmountBaseUnits",
    (max) => {
      expect(request(v2Required([v2Entry()]), { maxAmountBaseUnits: max }).success).toBe(false);
    },
  );

  it("refuses another protocol version, a v2 answer without its resource, and an entry without scheme or network", () => {
    expect(request({ x402Version: 3, accepts: [v2Entry()] }).success).toBe(false);
    expect(request({ x402Version: 2, accepts: [v2Entry()] }).success).toBe(false);
    expect(request(v2Required([{ ...v2Entry(), scheme: undefined }])).success).toBe(false);
    expect(request(v2Required([{ ...v2Entry(), network: 8453 }])).success).toBe(false);
  });
});

describe("the entry the service pays", () => {
  it("is the first on its scheme, network and asset; other networks' entries are passed over, not refused", () => {
    const choice = choiceOf(v2Required([solanaEntry, v2Entry({ network: "eip155:8453" }), v2Entry()]));
    expect(choice).toMatchObject({
      kind: "payable",
      index: 2,
      terms: { version: 2, network: "eip155:84532", payTo: PAY_TO, asset: CHAIN.asset, value: 1000n },
    });
    expect(choiceOf({ x402Version: 1, accepts: [v1Entry()] })).toMatchObject({
      kind: "payable",
      index: 0,
      terms: { version: 1, network: "base-sepolia", value: 50_000n, maxTimeoutSeconds: 60 },
    });
  });

  it.each([
    ["another network", v2Entry({ network: "eip155:8453" })],
    ["the v1 name in a v2 answer", v2Entry({ network: "base-sepolia" })],
    ["another asset", v2Entry({ asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" })],
    ["another scheme", v2Entry({ scheme: "upto" })],
    ["no asset", v2Entry({ asset: undefined })],
  ])("finds nothing payable with %s: unsupported", (_, entry) => {
    expect(choiceOf(v2Required([entry]))).toEqual({ kind: "unsupported" });
  });

  it("takes the v1 name only in a v1 answer", () => {
    expect(choiceOf({ x402Version: 1, accepts: [v1Entry({ network: "eip155:84532" })] })).toEqual({
      kind: "unsupported",
    });
  });

  it.each([
    ["a negative amount", { amount: "-1000" }, "amount"],
    ["a zero amount", { amount: "0" }, "amount"],
    ["a decimal amount", { amount: "10.5" }, "amount"],
    ["an exponent", { amount: "1e6" }, "amount"],
    ["a non-numeric amount", { amount: "lots" }, "amount"],
    ["a huge amount", { amount: (MAX_OUTBOUND_BASE_UNITS + 1n).toString() }, "amount"],
    ["no amount", { amount: undefined }, "amount"],
    ["a maxTimeoutSeconds of years", { maxTimeoutSeconds: 3 * 365 * 86_400 }, "max_timeout_seconds"],
    ["a maxTimeoutSeconds just above an hour", { maxTimeoutSeconds: 3601 }, "max_timeout_seconds"],
    ["a zero maxTimeoutSeconds", { maxTimeoutSeconds: 0 }, "max_timeout_seconds"],
    ["a fractional maxTimeoutSeconds", { maxTimeoutSeconds: 1.5 }, "max_timeout_seconds"],
    ["a payTo that is no address", { payTo: "merchant" }, "pay_to"],
    ["the zero address as payTo", { payTo: "0x0000000000000000000000000000000000000000" }, "pay_to"],
    ["another token's domain", { extra: { name: "USD Coin", version: "2" } }, "eip712_domain"],
    ["no domain", { extra: undefined }, "eip712_domain"],
  ])("refuses %s on the service's rails, naming what", (_, over, problem) => {
    expect(choiceOf(v2Required([solanaEntry, v2Entry(over)]))).toEqual({ kind: "invalid", index: 1, problem });
  });

  it("refuses an address of the service's own as payTo, in any case; another is paid", () => {
    const own = ["0x00000000000000000000000000000000000000A1", CHAIN.asset] as Hex[];
    const withOwn = { ...CHAIN, ownAddresses: own };
    for (const payTo of [own[0]!.toLowerCase(), CHAIN.asset])
      expect(choiceOf(v2Required([v2Entry({ payTo })]), withOwn)).toEqual({
        kind: "invalid",
        index: 0,
        problem: "pay_to",
      });
    expect(choiceOf(v2Required([v2Entry()]), withOwn)).toMatchObject({ kind: "payable" });
  });

  it("a v1 amount is maxAmountRequired", () => {
    const invalid = choiceOf({ x402Version: 1, accepts: [v1Entry({ maxAmountRequired: "-5" })] });
    expect(invalid).toEqual({ kind: "invalid", index: 0, problem: "amount" });
  });

  it("passes over a malformed entry for a later good one, and takes an hour exactly", () => {
    const choice = choiceOf(v2Required([v2Entry({ amount: "0" }), v2Entry({ maxTimeoutSeconds: 3600 })]));
    expect(choice).toMatchObject({ kind: "payable", index: 1, terms: { maxTimeoutSeconds: 3600 } });
  });

  it("compares the amount with the agent's ceiling exactly", () => {
    const choice = choiceOf(v2Required([v2Entry({ amount: "1000" })]));
    if (choice.kind !== "payable") throw new Error(choice.kind);
    expect(overMaxAmount(choice.terms, undefined)).toBe(false);
    expect(overMaxAmount(choice.terms, "1000")).toBe(false);
    expect(overMaxAmount(choice.terms, "999")).toBe(true);
  });
});

/** Signs the chosen entry's authorization with the test key and builds the header; all the parts. */
async function signedHeader(paymentRequired: PaymentRequired) {
  const choice = choosePayableEntry(CHAIN, paymentRequired);
  if (choice.kind !== "payable") throw new Error(`not payable: ${JSON.stringify(choice)}`);
  const authorization = authorizationFor(choice.terms, SIGNER.address, NOW, NONCE);
  const signature = await signTransferAuthorization(SIGNER, choice.terms, CHAIN.chainId, authorization);
  return {
    choice,
    authorization,
    signature,
    header: paymentHeader(paymentRequired, choice.entry, authorization, signature),
  };
}

const recovers = async (signature: Hex, a: Record<string, string>, name = "USDC") =>
  isAddressEqual(
    await signerOfAuthorization(signature, a, { name, version: "2", chainId: 84532, verifyingContract: CHAIN.asset }),
    a.from as Hex,
  );

describe("the signed payment header", () => {
  it("v2: PAYMENT-SIGNATURE, read back by @x402/core, the entry echoed whole, the signer recovered", async () => {
    const extensions = { "payment-identifier": { info: { required: false }, schema: { type: "object" } } };
    const entry = v2Entry({ extra: { name: "USDC", version: "2", assetTransferMethod: "eip3009" } });
    const parsed = request({ ...v2Required([solanaEntry, entry]), extensions });
    expect(parsed.success).toBe(true);
    const { header, signature } = await signedHeader(parsed.data!.paymentRequired);
    expect(header.name).toBe("PAYMENT-SIGNATURE");
    expect(header.value).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);

    const decoded = decodePaymentSignatureHeader(header.value);
    expect(decoded.x402Version).toBe(2);
    expect(decoded.accepted).toEqual(entry);
    expect(decoded.resource).toEqual(v2Required([]).resource);
    expect(decoded.extensions).toEqual(extensions);
    const a = (decoded.payload as { authorization: Record<string, string> }).authorization;
    expect(a).toEqual({
      from: SIGNER.address,
      to: PAY_TO,
      value: "1000",
      validAfter: "0",
      validBefore: String(NOW + 300),
      nonce: NONCE,
    });
    expect((decoded.payload as { signature: string }).signature).toBe(signature);
    expect(await recovers(signature, a)).toBe(true);
    // Signed over the token's own domain only.
    expect(await recovers(signature, a, "USD Coin")).toBe(false);

    // The service's own decoder reads it as its facilitator would.
    expect(decodePaymentHeader(header.value)).toMatchObject({
      version: 2,
      scheme: "exact",
      network: "eip155:84532",
      accepted: { asset: CHAIN.asset.toLowerCase(), payTo: PAY_TO.toLowerCase(), amount: "1000" },
      authorization: { from: SIGNER.address.toLowerCase(), value: "1000", nonce: NONCE },
      signature,
    });
  });

  it("v1: X-PAYMENT, valid to the x402 package's schema, the signer recovered", async () => {
    const parsed = request({ x402Version: 1, error: "X-PAYMENT header is required", accepts: [v1Entry()] });
    const { header, signature } = await signedHeader(parsed.data!.paymentRequired);
    expect(header.name).toBe("X-PAYMENT");
    const json = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(header.value), (c) => c.charCodeAt(0))));
    const official = PaymentPayloadSchema.parse(json);
    expect(official).toMatchObject({ x402Version: 1, scheme: "exact", network: "base-sepolia" });
    expect(json).toEqual({
      x402Version: 1,
      scheme: "exact",
      network: "base-sepolia",
      payload: {
        signature,
        authorization: {
          from: SIGNER.address,
          to: PAY_TO,
          value: "50000",
          validAfter: "0",
          validBefore: String(NOW + 60),
          nonce: NONCE,
        },
      },
    });
    expect(await recovers(signature, json.payload.authorization)).toBe(true);
    expect(decodePaymentHeader(header.value)).toMatchObject({
      version: 1,
      network: "base-sepolia",
      accepted: null,
      authorization: { to: PAY_TO.toLowerCase(), value: "50000" },
    });
  });

  it("signs to the checksummed payTo whatever case the entry wrote it in", async () => {
    const parsed = request(v2Required([v2Entry({ payTo: PAY_TO.toLowerCase() })]));
    const { authorization, choice } = await signedHeader(parsed.data!.paymentRequired);
    expect(authorization.to).toBe(getAddress(PAY_TO));
    // The entry itself is echoed as the seller wrote it.
    expect(choice.entry.payTo).toBe(PAY_TO.toLowerCase());
  });
});
