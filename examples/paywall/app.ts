// A merchant's own API, paid per call with x402 through the official Hono middlewares, the service as
// their facilitator. Nothing here is the service's code: a merchant writes this in its own project.
import { HTTPFacilitatorClient } from "@x402/core/server";
import { convertToTokenAmount } from "@x402/core/utils";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/hono";
import { Hono } from "hono";
import { paymentMiddleware as paymentMiddlewareV1 } from "x402-hono";
import { authHeaders, baseUnitsOf, type FacilitatorTerms, networkNames, TOKEN_DECIMALS } from "./facilitator";

/** What one call of the paid route costs. */
export const PRICE = "$0.001";
export const PAID_PATH = "/report";
const DESCRIPTION = "One market report";

/** The API's own routes, paid or not: the middleware in front decides. */
function routes(app: Hono, version: 1 | 2) {
  app.get("/health", (c) => c.json({ ok: true }));
  app.get(PAID_PATH, (c) =>
    c.json({ report: { market: "widgets", trend: "up", at: new Date().toISOString() }, paidWith: `x402 v${version}` }),
  );
  return app;
}

/**
 * The API behind `@x402/hono` (x402 version 2). Prices in dollars go through a money parser that names
 * the service's token and its EIP-712 domain, since the SDK's defaults know only the public USDC
 * contracts; the merchant key rides on every facilitator call through `createAuthHeaders`.
 */
export function paywallV2(terms: FacilitatorTerms, merchantKey: string): Hono {
  const facilitator = new HTTPFacilitatorClient({
    url: terms.facilitatorUrl,
    createAuthHeaders: async () => authHeaders(merchantKey),
  });
  const scheme = new ExactEvmScheme().registerMoneyParser(async (amount) => ({
    amount: convertToTokenAmount(String(amount), TOKEN_DECIMALS),
    asset: terms.asset,
    extra: { name: terms.extra.name, version: terms.extra.version },
  }));
  const network = networkNames(terms.network).v2;
  const server = new x402ResourceServer(facilitator).register(network, scheme);
  const app = new Hono();
  app.use(
    paymentMiddleware(
      {
        [`GET ${PAID_PATH}`]: {
          accepts: { scheme: "exact", price: PRICE, network, payTo: terms.payTo },
          description: DESCRIPTION,
          mimeType: "application/json",
        },
      },
      server,
    ),
  );
  return routes(app, 2);
}

/**
 * The same API behind `x402-hono` (x402 version 1). Its dollar prices always mean the public USDC of
 * the network, so the price is given as an amount of the service's token: `$0.001` in base units.
 */
export function paywallV1(terms: FacilitatorTerms, merchantKey: string): Hono {
  const network = networkNames(terms.network).v1 as "base-sepolia";
  const app = new Hono();
  app.use(
    paymentMiddlewareV1(
      terms.payTo,
      {
        [`GET ${PAID_PATH}`]: {
          price: {
            amount: baseUnitsOf(PRICE),
            asset: { address: terms.asset, decimals: TOKEN_DECIMALS, eip712: terms.extra },
          },
          network,
          config: { description: DESCRIPTION, mimeType: "application/json" },
        },
      },
      {
        url: terms.facilitatorUrl as `${string}://${string}`,
        createAuthHeaders: async () => authHeaders(merchantKey),
      },
    ),
  );
  return routes(app, 1);
}
