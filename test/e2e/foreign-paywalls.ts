// Paywalls this project did not write, on the local chain: the official x402 middlewares, unchanged,
// settling through the official facilitator code with a gas key of their own. They stand for any
// x402 seller an agent may meet, so the service's outbound payments are tested against the protocol's
// reference code rather than against its own reading of it.

import { x402Facilitator } from "@x402/core/facilitator";
import type { FacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements, VerifyResponse } from "@x402/core/types";
import { convertToTokenAmount } from "@x402/core/utils";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { registerExactEvmScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { paymentMiddleware, x402ResourceServer } from "@x402/hono";
import { Hono } from "hono";
import { type Chain, createWalletClient, defineChain, type Hex, http, publicActions } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { settle as settleV1, verify as verifyV1 } from "x402/facilitator";
import type { PaymentPayload as PayloadV1, PaymentRequirements as RequirementsV1 } from "x402/types";
import { paymentMiddleware as paymentMiddlewareV1 } from "x402-hono";
import { type Served, serve } from "../../examples/paywall/serve";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { giveGas, LOCAL_CHAIN_ID } from "../../scripts/lib/chain.mjs";

/**
 * How a paywall treats a payment it accepted. `normal`: the middleware settles after the handler, as
 * shipped. `never-settles`: it answers 200 and never asks the facilitator to settle, so the payer's
 * authorization stays unused. `settles-late`: it answers 200 at once and keeps the payment until the
 * test calls `settleHeld()`. Both of the latter stand between the middleware and the official
 * facilitator; neither changes either.
 */
export type ForeignMode = "normal" | "never-settles" | "settles-late";

/** The local chain's token and how a paywall reaches it (from `npm run dev` and a merchant's facilitator terms). */
export interface ForeignChain {
  rpcUrl: string;
  asset: Hex;
  /** The token's EIP-712 domain, which payers sign over. */
  extra: { name: string; version: string };
}

/** A facilitator's settle answer, of either version: the fields a test reads. */
export interface Settled {
  success: boolean;
  transaction: string;
  network: string;
  errorReason?: string;
  payer?: string;
}

/** How a paywall is started. */
export interface ForeignOptions {
  mode?: ForeignMode;
  /**
   * The `maxTimeoutSeconds` its entries ask for (the middlewares' default, 300, when absent): a short
   * one lets a test see an authorization expire unused without waiting minutes.
   */
  maxTimeoutSeconds?: number;
}

export interface ForeignPaywall {
  url: string;
  version: 1 | 2;
  mode: ForeignMode;
  /** A fresh address no one else pays: its token balance is what this paywall received. */
  payTo: Hex;
  /** The gas payer of its facilitator. */
  facilitator: Hex;
  /** Each paid path and its price in token base units. */
  prices: Record<(typeof PATHS)[number], bigint>;
  /** The payments held back (settles-late), or accepted and never settled (never-settles). */
  held: () => number;
  /** Settles every held payment through the official facilitator, in the order they came; settles-late only. */
  settleHeld: () => Promise<Settled[]>;
  close: () => Promise<void>;
}

/** The paid routes and their prices: one below a cent, one above. */
export const PATHS = ["/cheap", "/dear"] as const;
const PRICES = { "/cheap": "$0.001", "/dear": "$0.05" } as const;
const DECIMALS = 6;
/** The local chain presents itself as Base Sepolia (its chain id), as the service's dev setup does. */
export const FOREIGN_NETWORKS = { v1: "base-sepolia", v2: "eip155:84532" } as const;

const baseUnits = (price: string) => BigInt(convertToTokenAmount(price.replace("$", ""), DECIMALS));

/** A viem client on the local chain that sends from a fresh key, funded with gas through anvil. */
async function gasPayer(rpcUrl: string) {
  const account = privateKeyToAccount(generatePrivateKey());
  const chain: Chain = defineChain({
    id: LOCAL_CHAIN_ID as number,
    name: "local (Base Sepolia's id)",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const client = createWalletClient({ account, chain, transport: http(rpcUrl) }).extend(publicActions);
  await giveGas(client, account.address);
  return client;
}

/** The payments a mode keeps from the facilitator's settle, and the answer the middleware gets instead. */
function holding<P, R, S extends Settled>(mode: ForeignMode, settle: (payload: P, requirements: R) => Promise<S>) {
  const held: { payload: P; requirements: R }[] = [];
  return {
    held,
    /** Settles at once (normal), or holds the payment and answers success without a transaction. */
    settle: async (payload: P, requirements: R, answer: S): Promise<S> => {
      if (mode === "normal") return settle(payload, requirements);
      held.push({ payload, requirements });
      return answer;
    },
    settleHeld: async () => {
      if (mode !== "settles-late") throw new Error(`a ${mode} paywall settles nothing later`);
      const outcomes: S[] = [];
      for (const { payload, requirements } of held.splice(0)) outcomes.push(await settle(payload, requirements));
      return outcomes;
    },
  };
}

function routes(app: Hono, version: 1 | 2) {
  for (const path of PATHS) app.get(path, (c) => c.json({ paid: path, paidWith: `x402 v${version}` }));
  app.get("/free", (c) => c.json({ free: true }));
  return app;
}

const fresh = () => privateKeyToAccount(generatePrivateKey()).address;

/**
 * An `@x402/hono` (version 2) paywall, its facilitator `@x402/core`'s `x402Facilitator` with
 * `@x402/evm`'s exact scheme, in process (the middleware's facilitator client is that object).
 */
export async function foreignPaywallV2(chain: ForeignChain, options: ForeignOptions = {}): Promise<ForeignPaywall> {
  const { mode = "normal", maxTimeoutSeconds } = options;
  const wallet = await gasPayer(chain.rpcUrl);
  const facilitator = registerExactEvmScheme(new x402Facilitator(), {
    signer: toFacilitatorEvmSigner({ ...wallet, address: wallet.account.address } as never),
    networks: FOREIGN_NETWORKS.v2,
  });
  const hold = holding<PaymentPayload, PaymentRequirements, Awaited<ReturnType<FacilitatorClient["settle"]>>>(
    mode,
    (p, r) => facilitator.settle(p, r),
  );
  const client: FacilitatorClient = {
    verify: (p, r): Promise<VerifyResponse> => facilitator.verify(p, r),
    settle: (p, r) =>
      hold.settle(p, r, { success: true, transaction: "", network: r.network, payer: payerOf(p.payload) }),
    getSupported: async () => facilitator.getSupported() as never,
  };
  // The SDK's dollar prices name only the public USDC contracts: this parser names the local token.
  const scheme = new ExactEvmScheme().registerMoneyParser(async (amount) => ({
    amount: convertToTokenAmount(String(amount), DECIMALS),
    asset: chain.asset,
    extra: { ...chain.extra },
  }));
  const server = new x402ResourceServer(client).register(FOREIGN_NETWORKS.v2, scheme);
  const payTo = fresh();
  const config = Object.fromEntries(
    PATHS.map((path) => [
      `GET ${path}`,
      {
        accepts: { scheme: "exact", price: PRICES[path], network: FOREIGN_NETWORKS.v2, payTo, maxTimeoutSeconds },
        description: `The ${path.slice(1)} resource`,
        mimeType: "application/json",
      },
    ]),
  );
  const app = new Hono();
  app.use(paymentMiddleware(config, server));
  return finish(await serve(routes(app, 2).fetch), { version: 2, mode, payTo, wallet, hold });
}

/**
 * An `x402-hono` 1.1.0 (version 1) paywall, its facilitator the `x402` 1.2.0 package's `verify` and
 * `settle` behind a local HTTP facilitator, as the middleware only speaks to one by URL.
 */
export async function foreignPaywallV1(chain: ForeignChain, options: ForeignOptions = {}): Promise<ForeignPaywall> {
  const { mode = "normal", maxTimeoutSeconds } = options;
  const wallet = await gasPayer(chain.rpcUrl);
  const hold = holding<PayloadV1, RequirementsV1, Awaited<ReturnType<typeof settleV1>>>(mode, (p, r) =>
    settleV1(wallet as never, p, r),
  );
  const facilitatorApp = new Hono();
  facilitatorApp.post("/verify", async (c) => {
    const body = (await c.req.json()) as { paymentPayload: PayloadV1; paymentRequirements: RequirementsV1 };
    return c.json(await verifyV1(wallet as never, body.paymentPayload, body.paymentRequirements));
  });
  facilitatorApp.post("/settle", async (c) => {
    const { paymentPayload: p, paymentRequirements: r } = (await c.req.json()) as {
      paymentPayload: PayloadV1;
      paymentRequirements: RequirementsV1;
    };
    return c.json(
      await hold.settle(p, r, { success: true, transaction: "", network: r.network, payer: payerOf(p.payload) }),
    );
  });
  facilitatorApp.get("/supported", (c) =>
    c.json({ kinds: [{ x402Version: 1, scheme: "exact", network: FOREIGN_NETWORKS.v1 }] }),
  );
  const facilitatorServer = await serve(facilitatorApp.fetch);
  const payTo = fresh();
  const config = Object.fromEntries(
    PATHS.map((path) => [
      `GET ${path}`,
      {
        // Version 1's dollar prices always mean the network's public USDC: the amount names the local token.
        price: {
          amount: baseUnits(PRICES[path]).toString(),
          asset: { address: chain.asset, decimals: DECIMALS, eip712: chain.extra },
        },
        network: FOREIGN_NETWORKS.v1,
        config: { description: `The ${path.slice(1)} resource`, mimeType: "application/json", maxTimeoutSeconds },
      },
    ]),
  );
  const app = new Hono();
  app.use(paymentMiddlewareV1(payTo, config, { url: facilitatorServer.url as `${string}://${string}` }));
  const served = await serve(routes(app, 1).fetch);
  const paywall = finish(served, { version: 1, mode, payTo, wallet, hold });
  return {
    ...paywall,
    close: async () => {
      await paywall.close();
      await facilitatorServer.close();
    },
  };
}

function payerOf(payload: unknown): string {
  return (payload as { authorization?: { from?: string } }).authorization?.from ?? "";
}

function finish(
  served: Served,
  parts: {
    version: 1 | 2;
    mode: ForeignMode;
    payTo: Hex;
    wallet: { account: { address: Hex } };
    hold: { held: unknown[]; settleHeld: () => Promise<Settled[]> };
  },
): ForeignPaywall {
  return {
    url: served.url,
    version: parts.version,
    mode: parts.mode,
    payTo: parts.payTo,
    facilitator: parts.wallet.account.address,
    prices: { "/cheap": baseUnits(PRICES["/cheap"]), "/dear": baseUnits(PRICES["/dear"]) },
    held: () => parts.hold.held.length,
    settleHeld: parts.hold.settleHeld,
    close: served.close,
  };
}
