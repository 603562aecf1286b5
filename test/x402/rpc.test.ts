import { env } from "cloudflare:workers";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { rpcCall } from "../../src/chain/client";
import { settingsOf } from "../../src/config/env";
import { refuseAtRelay } from "../helpers/x402";

/*
 * The settlement path's own JSON-RPC calls (src/chain/client.ts), through the test relay in front of
 * the chain. Each case reads a fresh random address, so its refusal meets no other file's calls.
 */
const x = () => settingsOf(env).x402!;
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

describe("rpcCall", () => {
  it("a read whose request failed (HTTP 503) is sent once more when asked to, and answers", async () => {
    const address = freshAddress();
    await refuseAtRelay({ containing: address, method: "eth_getTransactionCount", times: 1, httpStatus: 503 });
    expect(await rpcCall(x(), "eth_getTransactionCount", [address, "pending"], { retry: true })).toBe("0x0");
  });

  it("without retry (a send) the same failure is thrown as it came, and only one request was made", async () => {
    const address = freshAddress();
    await refuseAtRelay({ containing: address, method: "eth_getTransactionCount", times: 2, httpStatus: 503 });
    await expect(rpcCall(x(), "eth_getTransactionCount", [address, "pending"])).rejects.toThrow(
      "RPC answered HTTP 503",
    );
    // The second refusal is still there: the call above was made once.
    await expect(rpcCall(x(), "eth_getTransactionCount", [address, "pending"])).rejects.toThrow(
      "RPC answered HTTP 503",
    );
    expect(await rpcCall(x(), "eth_getTransactionCount", [address, "pending"])).toBe("0x0");
  });

  it("a JSON-RPC error is the node's answer, with its message whatever the HTTP status, and is never retried", async () => {
    const address = freshAddress();
    await refuseAtRelay({
      containing: address,
      method: "eth_getBalance",
      times: 1,
      message: "nonce too low: next nonce 7, tx nonce 3",
      rpcErrorStatus: 400,
    });
    await expect(rpcCall(x(), "eth_getBalance", [address, "latest"], { retry: true })).rejects.toThrow(
      "eth_getBalance: nonce too low: next nonce 7, tx nonce 3",
    );
    expect(await rpcCall(x(), "eth_getBalance", [address, "latest"], { retry: true })).toBe("0x0");
  });

  it("a null result is a result (a receipt not mined yet)", async () => {
    expect(await rpcCall(x(), "eth_getTransactionReceipt", [`0x${"ab".repeat(32)}`])).toBeNull();
  });
});
