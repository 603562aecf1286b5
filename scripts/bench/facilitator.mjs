// The service as a merchant's own x402 facilitator, for the benchmark: `POST /x402/facilitator/settle`
// with the merchant's key and the body `@x402/core`'s HTTPFacilitatorClient posts (version 2:
// `{ x402Version: 2, paymentPayload, paymentRequirements }`), each a fresh authorization of $0.001
// to the merchant's own payTo, measured by count against the chain floor of x402 settle.
import { call, createMerchant } from "./api.mjs";
import { load } from "./load.mjs";
import { blockNumber, settlementGas, signPayments } from "./x402.mjs";

/** $0.001 in token base units: a facilitated pay-per-call price below a cent. */
export const FACILITATED_VALUE = 1000n;

/**
 * A merchant of its own and what its middleware reads first (`GET /merchant/x402/facilitator`):
 * its payTo, the network (CAIP-2), the token and its EIP-712 name and version.
 */
export async function facilitatorMerchant(B, consoleKey) {
  const merchant = await createMerchant(B, consoleKey, "bench facilitator");
  const terms = await call(B, "GET", "/merchant/x402/facilitator", { token: merchant.apiKey });
  return { apiKey: merchant.apiKey, terms };
}

/**
 * `count` settle bodies as the official version 2 client sends them: the requirements the
 * merchant's route states, and the payload accepting them, signed by the bench's payers in turn.
 * @returns {Promise<string[]>}
 */
export async function settleBodies(terms, count) {
  const paymentRequirements = {
    scheme: "exact",
    network: terms.network,
    amount: FACILITATED_VALUE.toString(),
    asset: terms.asset,
    payTo: terms.payTo,
    maxTimeoutSeconds: 300,
    extra: terms.extra,
  };
  // signPayments signs each to its terms' payTo for maxAmountRequired: here, all to the merchant's one address.
  const asTerms = { ...terms, maxAmountRequired: paymentRequirements.amount };
  const signed = await signPayments(Array(count).fill(asTerms));
  const resource = { url: "https://api.bench.example/call", description: "a paid call", mimeType: "application/json" };
  return signed.map(({ authorization, signature }) =>
    JSON.stringify({
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        resource,
        accepted: paymentRequirements,
        payload: { signature, authorization },
      },
      paymentRequirements,
    }),
  );
}

/**
 * The row: `warmup` settlements, then `count` measured, `connections` in flight. A 200 whose answer
 * is not `success: true` is an error too (the protocol answers a failed settlement with a 200).
 * Also the gas per settlement of the service's transactions in the row's blocks.
 */
export async function facilitatorSettle({ base, rpcUrl, merchant, bodies, warmup, count, quiet }) {
  const from = (await blockNumber(rpcUrl)) + 1n;
  let dry = 0;
  let refused = 0;
  let firstRefusal = null;
  const result = await load({
    ...base,
    warmupSeconds: 0,
    warmupRequests: warmup,
    requests: count,
    next: () => {
      const body = bodies.pop();
      if (!body) dry++;
      return {
        method: "POST",
        path: "/x402/facilitator/settle",
        headers: { "content-type": "application/json", authorization: `Bearer ${merchant.apiKey}` },
        body: body ?? "{}",
      };
    },
    expect: (status) => status === 200,
    onResponse: (status, text) => {
      if (status !== 200 || text.includes('"success":true')) return;
      refused++;
      firstRefusal ??= text.slice(0, 300);
    },
    afterWarmup: async () => {
      await quiet();
      dry = 0;
      refused = 0;
    },
  });
  // Settled answers only: a 200 refusing the payment moves from ok to errors.
  const ok = result.ok - refused;
  Object.assign(result, { ok, errors: result.errors + refused, okRps: ok / result.seconds, refused, firstRefusal });
  if (dry > 0) result.exhausted = true;
  result.gas = await settlementGas(rpcUrl, merchant.terms.asset, from, await blockNumber(rpcUrl));
  return { result, dry };
}
