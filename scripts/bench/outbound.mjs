// The outbound x402 row (issue #41): agents pay someone else's paywall through
// `POST /agent/x402/payments`, each request one EIP-3009 authorization signed by the settlement key and
// one ledger commit debiting the agent. Its floor is the same signature plus one DO RPC running a
// payment-sized batch (`POST /__bench/sign-do-d1-batch`, bench/routes.ts).
import { LOCAL_CHAIN_ID } from "../lib/chain.mjs";
import { call, inParallel } from "./api.mjs";

/** What each authorization moves: $0.001, so the row's few thousand stay far inside the settlement address's float. */
export const OUTBOUND_BASE_UNITS = 1000n;
/** Who they pay: never settled (the agent would send the header), so any address the screening passes. */
export const OUTBOUND_PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
const RESOURCE = "https://bench.example/report";

/**
 * The body an agent posts after a paywall's version 2 402: one `exact` entry on the service's chain
 * and token (the token's address and EIP-712 domain as a charge's own terms state them), valid for
 * the longest the service signs (an hour), so no authorization expires during a run.
 */
export function outboundBody(chargeTerms) {
  const entry = {
    scheme: "exact",
    network: `eip155:${LOCAL_CHAIN_ID}`,
    amount: OUTBOUND_BASE_UNITS.toString(),
    asset: chargeTerms.asset,
    payTo: OUTBOUND_PAY_TO,
    maxTimeoutSeconds: 3600,
    extra: chargeTerms.extra,
  };
  return JSON.stringify({
    resource: RESOURCE,
    paymentRequired: { x402Version: 2, resource: { url: RESOURCE }, accepts: [entry] },
  });
}

/** Lets each agent pay x402 paywalls on any host (`allowedX402Hosts: ["*"]`), no other limit, as their policy was. */
export const allowAnyHost = (base, consoleKey, agents) =>
  inParallel(agents, 8, (a) =>
    call(base, "PUT", `/console/agents/${a.agentId}/policy`, { token: consoleKey, body: { allowedX402Hosts: ["*"] } }),
  );

/** The settlement address's outstanding authorizations after `count` of them, in dollars. */
export const authorizedDollars = (count) => (Number(OUTBOUND_BASE_UNITS) * count) / 1e6;
