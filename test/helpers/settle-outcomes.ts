import { env } from "cloudflare:workers";
import { type Hex, parseSignature } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import { getCharge as readChargeRow } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { setFaultHook } from "../../src/lib/faults";
import { type Facilitator, remoteFacilitator } from "../../src/x402/facilitator";
import { reconcileOpenPayments } from "../../src/x402/reconcile";
import { payWithX402 } from "../../src/x402/service";
import { api, BASE, consoleToken } from "./api";
import { createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "./factories";
import {
  chain,
  freshPayer,
  gasWallet,
  type Payer,
  publicClient,
  type SignedAuthorization,
  submitAuthorization,
  tokenBalance,
  xPaymentFor,
} from "./x402";

/*
 * What test/x402/settle-outcomes.test.ts and test/x402/facilitator-outcomes.test.ts share: a charge with
 * a payer and its signed payment, payments through a chosen facilitator, and the checks of a charge
 * credited once.
 */
export const CENTS = 150;
export const VALUE = BigInt(CENTS) * 10_000n;
export const x = () => settingsOf(env).x402!;

/** The payer withdraws its authorization (EIP-3009 cancelAuthorization, as USDC has it). */
export async function cancelAuthorization(payer: Payer, nonce: Hex) {
  const signature = await privateKeyToAccount(payer.key).signTypedData({
    domain: { name: "USD Coin", version: "2", chainId: chain().chainId, verifyingContract: chain().token },
    types: {
      CancelAuthorization: [
        { name: "authorizer", type: "address" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "CancelAuthorization",
    message: { authorizer: payer.address, nonce },
  });
  const { r, s, v } = parseSignature(signature);
  const wallet = await gasWallet();
  const hash = await wallet.writeContract({
    chain: null,
    address: chain().token,
    abi: [
      {
        type: "function",
        name: "cancelAuthorization",
        stateMutability: "nonpayable",
        inputs: [
          { name: "a", type: "address" },
          { name: "n", type: "bytes32" },
          { name: "v", type: "uint8" },
          { name: "r", type: "bytes32" },
          { name: "s", type: "bytes32" },
        ],
        outputs: [],
      },
    ],
    functionName: "cancelAuthorization",
    args: [payer.address, nonce, Number(v), r, s],
  });
  expect((await publicClient().waitForTransactionReceipt({ hash })).status).toBe("success");
}

/** A remote facilitator at a host only this file's fetch knows: its /settle runs `settle` and answers what it returns. */
const FACILITATOR = "https://facilitator.settle-outcomes.test/";
export function withRemoteFacilitator(settle: (payload: SignedAuthorization) => Promise<Response>): Facilitator {
  const real = globalThis.fetch;
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input instanceof Request ? input.url : input);
    if (!url.startsWith(FACILITATOR)) return real(input as never, init);
    if (url.endsWith("/verify")) return Response.json({ isValid: true });
    return settle(JSON.parse(String(init?.body)).paymentPayload.payload);
  }) as typeof fetch;
  restore = () => (globalThis.fetch = real);
  return remoteFacilitator(x(), FACILITATOR);
}
let restore = () => {};

/** A remote facilitator that broadcasts the transfer itself, then answers `reply` (`sent` names what it broadcast). */
export function broadcastingThen(reply: () => Response) {
  const sent = { transaction: "" };
  const facilitator = withRemoteFacilitator(async (payload) => {
    sent.transaction = (await submitAuthorization(payload)).transactionHash;
    return reply();
  });
  return { facilitator, sent };
}
export const settleReply = (errorReason: string) =>
  Response.json({ success: false, errorReason, transaction: "", network: "base-sepolia", payer: "" });
/** Puts back the global fetch a remote facilitator replaced, and clears fault hooks: each test's afterEach. */
export function cleanUp() {
  restore();
  setFaultHook(null);
}

export async function setUp() {
  const merchant = await createMerchant({ name: "Settle Outcomes" });
  const charge = await createCharge(merchant.apiKey, CENTS);
  const payer = await freshPayer(10_000_000n);
  const payment = await xPaymentFor(`/charges/${charge.chargeId}/x402`, payer.key, VALUE);
  const row = await readChargeRow(env.DB, charge.chargeId);
  const pay = (facilitator?: Facilitator) =>
    payWithX402(
      env,
      { kind: "charge", charge: row! },
      `${BASE}/charges/${charge.chargeId}/x402`,
      payment.header,
      facilitator,
    );
  const state = async () => ({
    payment: await env.DB.prepare("SELECT status, tx_hash AS txHash, error FROM x402_payments WHERE charge_id = ?")
      .bind(charge.chargeId)
      .first<{ status: string; txHash: string | null; error: string }>(),
    charge: await env.DB.prepare(
      "SELECT status, x402_claim IS NOT NULL AS claimed, reference FROM charges WHERE id = ?",
    )
      .bind(charge.chargeId)
      .first<{ status: string; claimed: number; reference: string | null }>(),
    merchantBalance: await merchantBalance(merchant.apiKey),
  });
  return { merchant, charge, payer, payment, pay, state };
}

/** Reconciles until this charge is decided, and checks what the chain and the ledger say afterwards. */
export async function expectCreditedOnce(s: Awaited<ReturnType<typeof setUp>>, transaction: string) {
  await reconcileOpenPayments(env);
  expect(await s.state()).toEqual({
    payment: expect.objectContaining({ status: "settled", txHash: transaction }),
    charge: { status: "paid", claimed: 1, reference: transaction },
    merchantBalance: CENTS,
  });
  await reconcileOpenPayments(env);
  expect(await merchantBalance(s.merchant.apiKey)).toBe(CENTS);
  expect(await tokenBalance(s.payer.address)).toBe(10_000_000n - VALUE);
  // Nobody can pay the charge a second time.
  const agent = await createAgent({ credit: 1000 });
  expect((await payCharge(agent.apiKey, s.charge.chargeId)).status).toBe(409);
  expect((await api("GET", "/console/audit/verify", { token: await consoleToken() })).body.ok).toBe(true);
}
