import { encodeFunctionData, type Hex } from "viem";
import { describe, expect, it } from "vitest";
import { addressAndBytesArrayCall, staticCall } from "../../src/chain/abi-words";
import { EIP3009_ABI } from "../../src/chain/client";
import type { X402Settings } from "../../src/config/env";
import { batchTransfer, SETTLEMENT_BATCH_ABI } from "../../src/x402/batch";
import { transferCallData } from "../../src/x402/transfer";

/* The settle path's two hand-laid calls, against viem's general encoder on many random inputs. */

const random = (bytes: number): Hex =>
  `0x${Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("")}`;
const randomBig = (bytes: number) => BigInt(random(bytes));

describe("transferWithAuthorization, laid out by hand", () => {
  it("equals viem's encoding for 200 random authorizations (v as 27/28 and as a 0/1 parity)", () => {
    for (let k = 0; k < 200; k++) {
      const authorization = {
        from: random(20),
        to: random(20),
        value: randomBig(1 + (k % 32)).toString(),
        validAfter: randomBig(4).toString(),
        validBefore: randomBig(8).toString(),
        nonce: random(32),
      };
      const r = random(32);
      const s = random(32);
      const v = k % 2 === 0 ? 27 + (k % 4 === 0 ? 0 : 1) : k % 4 === 1 ? 0 : 1;
      const signature = `${r}${s.slice(2)}${v.toString(16).padStart(2, "0")}` as Hex;
      const expected = encodeFunctionData({
        abi: EIP3009_ABI,
        functionName: "transferWithAuthorization",
        args: [
          authorization.from,
          authorization.to,
          BigInt(authorization.value),
          BigInt(authorization.validAfter),
          BigInt(authorization.validBefore),
          authorization.nonce,
          v < 27 ? v + 27 : v,
          r,
          s,
        ],
      });
      expect(transferCallData({ authorization, signature })).toBe(expected);
    }
  });

  it("a value beyond 256 bits or a malformed signature is no call (null), never a wrong one", () => {
    const base = {
      from: random(20),
      to: random(20),
      value: (1n << 256n).toString(),
      validAfter: "0",
      validBefore: "1",
      nonce: random(32),
    };
    const signature = `${random(32)}${random(32).slice(2)}1b` as Hex;
    expect(transferCallData({ authorization: base, signature })).toBeNull();
    expect(transferCallData({ authorization: { ...base, value: "1" }, signature: "0x1234" })).toBeNull();
    expect(staticCall("0x12345678", [-1n])).toBeNull();
    expect(staticCall("0x12345678", [random(33)])).toBeNull();
  });
});

describe("settle(address, bytes[]), laid out by hand", () => {
  it("a batch's transaction equals viem's encoding, for 2 to 12 calls of any length, odd-sized ones too", () => {
    const fees = { maxFeePerGas: 1n, maxPriorityFeePerGas: 1n };
    for (let k = 2; k <= 12; k++) {
      const x = { asset: random(20), settlementBatch: { address: random(20), max: 50 } } as X402Settings;
      const calls = Array.from({ length: k }, (_, i) => random([0, 1, 31, 32, 33, 64, 292, 100][(i + k) % 8]!));
      const items = calls.map((data) => ({ data, gas: 1n, fees, from: random(20), nonce: random(32) }));
      const expected = encodeFunctionData({
        abi: SETTLEMENT_BATCH_ABI,
        functionName: "settle",
        args: [x.asset, calls],
      });
      expect(batchTransfer(x, items)).toMatchObject({ to: x.settlementBatch!.address, data: expected });
    }
  });

  it("an empty array, and an element that is not whole bytes (no call)", () => {
    const token = random(20);
    const expected = encodeFunctionData({ abi: SETTLEMENT_BATCH_ABI, functionName: "settle", args: [token, []] });
    expect(addressAndBytesArrayCall(expected.slice(0, 10) as Hex, token, [])).toBe(expected);
    expect(addressAndBytesArrayCall(expected.slice(0, 10) as Hex, token, ["0x123"])).toBeNull();
  });
});
