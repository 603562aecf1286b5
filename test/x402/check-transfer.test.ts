import { env } from "cloudflare:workers";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import type { DecodedPayment } from "../../src/x402/payload";
import { termsFor } from "../../src/x402/terms";
import { checkTransfer, gasAccountOf } from "../../src/x402/transfer";
import { freshPayer, signAuthorization } from "../helpers/x402";

/*
 * The chain's part of verification (checkTransfer): one JSON-RPC batch whose gas estimate runs the
 * transfer. A signature the offline checks would miss (or that they were skipped for) is refused
 * by the token itself, and named as the protocol names a bad signature. Fresh payers and receiving
 * addresses, so no other file's payments meet these.
 */
const VALUE = 10_000n;
const x = () => settingsOf(env).x402!;

async function paymentOf(signed: Awaited<ReturnType<typeof signAuthorization>>): Promise<DecodedPayment> {
  return {
    version: 1,
    scheme: "exact",
    network: x().network,
    accepted: null,
    authorization: signed.authorization,
    signature: signed.signature,
    paymentIdentifier: null,
    raw: {},
  };
}

describe("checkTransfer", () => {
  const gasFrom = () => gasAccountOf(x().facilitatorPrivateKeys[0]!).address;
  const termsTo = (to: `0x${string}`) => termsFor(x(), "http://service.test/r", 1, "check", to);

  it("an authorization signed by the payer passes, with the transfer prepared for the settler", async () => {
    const payer = await freshPayer(VALUE);
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const payment = await paymentOf(await signAuthorization(payer.key, VALUE, { to }));
    const check = await checkTransfer(x(), termsTo(to), payment, gasFrom());
    expect(check.kind).toBe("valid");
    expect(check.kind === "valid" && check.prepared?.gas).toBeGreaterThan(0n);
  });

  it("one signed by another key is refused by the token's own check as invalid_exact_evm_payload_signature", async () => {
    const payer = await freshPayer(VALUE);
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const payment = await paymentOf(await signAuthorization(payer.key, VALUE, { to, signerKey: generatePrivateKey() }));
    expect(await checkTransfer(x(), termsTo(to), payment, gasFrom())).toEqual({
      kind: "invalid",
      reason: "invalid_exact_evm_payload_signature",
    });
  });

  it("another revert keeps the node's message (validAfter in the future)", async () => {
    const payer = await freshPayer(VALUE);
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const validAfter = BigInt(Math.floor(Date.now() / 1000)) + 3_600n;
    const payment = await paymentOf(
      await signAuthorization(payer.key, VALUE, { to, validAfter, validBefore: validAfter + 600n }),
    );
    const check = await checkTransfer(x(), termsTo(to), payment, gasFrom());
    expect(check.kind).toBe("invalid");
    expect(check.kind === "invalid" && check.reason).toMatch(/^simulation_failed: .*valid/);
  });
});
