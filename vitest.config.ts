import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { keccak256, stringToHex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { defineConfig } from "vitest/config";
import { TEST_RECEIPT_KEYS } from "./test/helpers/receipt-keys";
import type { ChainLimits } from "./test/setup/chain.global";
import { LongestFirst } from "./test/setup/sequencer";
import { freshGasKeys } from "./test/setup/worker-keys";

declare module "vitest" {
  export interface ProvidedContext {
    seed: number;
  }
}

/**
 * The seed of the tests that draw random inputs (test/helpers/seed.ts): TEST_SEED replays a run
 * whose failure named it; without it, each run draws a new one.
 */
function testSeed(): number {
  const given = process.env.TEST_SEED;
  if (given === undefined || given === "") return Math.floor(Math.random() * 2 ** 31);
  if (!/^-?\d+$/.test(given)) throw new Error(`TEST_SEED is an integer, not ${JSON.stringify(given)}`);
  return Number(given);
}

/**
 * The provider limits of the Worker's chain (test/setup/chain.global.ts), for every workers project unless
 * the project sets its own: the relay refuses what a provider with a 1,000-block log range and 100-call
 * batches refuses (TEST_RPC_LIMITS=0 lets everything through, counted), and the chain has 3,000 empty
 * blocks before its contracts (TEST_CHAIN_HISTORY=<blocks> sets another count), a past longer than the
 * cap: every chain-facing path is tested as a hosted provider serves it.
 */
function testChainLimits(): ChainLimits {
  const { TEST_RPC_LIMITS: limits = "1", TEST_CHAIN_HISTORY: history = String(DEFAULT_CHAIN_HISTORY) } = process.env;
  if (!["", "0", "1"].includes(limits)) throw new Error(`TEST_RPC_LIMITS is 1 or 0, not ${JSON.stringify(limits)}`);
  if (!/^\d*$/.test(history)) throw new Error(`TEST_CHAIN_HISTORY is a block count, not ${JSON.stringify(history)}`);
  return { enforce: limits !== "0", history: Number(history || 0) };
}

/** Empty blocks before the tests' contracts: three times the log range cap. */
const DEFAULT_CHAIN_HISTORY = 3_000;

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  const shared = { migrations, seed: testSeed(), chainLimits: testChainLimits() };
  return {
    cacheDir: CACHE_DIR,
    test: {
      // Test files run three at a time, over every project: most of a file's time is waiting (its Worker
      // starting, the chain, a dev server), and each file has its own database, Worker, payers and gas keys.
      maxWorkers: 3,
      sequence: { sequencer: LongestFirst },
      projects: [
        workersProject(
          "workers",
          {
            include: ["test/**/*.test.ts"],
            exclude: [
              "test/e2e/**",
              "test/house/**",
              LANES_TEST,
              BENCH_TESTS,
              TREASURY_TESTS,
              BATCH_ONLY_TESTS,
              PAYOUTS_BATCH_TESTS,
              SHARDS_TESTS,
            ],
          },
          shared,
        ),
        // The settlement lanes test, its Worker with four gas keys: settlements spread over several lanes.
        workersProject("workers-lanes", { include: [LANES_TEST], gasKeys: 4 }, shared),
        // The built-in settler's races and outcomes again, batched through the SettlementBatch contract
        // (another send path of the settler), and the batch's own tests.
        workersProject("workers-batch", { include: BATCH_TESTS, batched: true }, shared),
        // Payouts sent in settlement batches, with a treasury of its own: its tests take the settlement
        // address's tokens away to make one payout's call fail inside a batch.
        workersProject(
          "workers-payouts-batch",
          { include: [PAYOUTS_BATCH_TESTS], batched: true, vars: PAYOUTS_BATCH_VARS },
          shared,
        ),
        // The treasury reconciliation reads whole balances: its Worker has a settlement address, a gas key
        // and a receiving key of its own, so no other file's payments, payouts or sweeps move them.
        workersProject("workers-treasury", { include: [TREASURY_TESTS], vars: TREASURY_VARS }, shared),
        // The same reconciliation with two ledger shards, owners spread over both: the ledger's expectation is
        // summed over both. Its treasury (settlement, gas and receiving keys) is its own too.
        workersProject(
          "workers-treasury-shards",
          { include: [TREASURY_TESTS], vars: { ...TREASURY_SHARDS_VARS, ...SHARDS_VARS } },
          shared,
        ),
        // Two ledger shards, owners spread over both: payments within one shard and across two, and the
        // scripted world of test/worlds again, whose answers must be those it gives with one shard.
        workersProject(
          "workers-shards",
          { include: [SHARDS_TESTS, SAME_WORLD_TESTS], exclude: [SHARDS_BATCH_TESTS], vars: SHARDS_VARS },
          shared,
        ),
        // The same two shards with x402 settlements batched: one transaction settling charges of both shards.
        workersProject(
          "workers-shards-batch",
          { include: [SHARDS_BATCH_TESTS], vars: SHARDS_VARS, batched: true },
          shared,
        ),
        // The bench's Worker (bench/worker.ts): the service plus the runtime floors of `npm run bench`.
        workersProject("bench", { include: [BENCH_TESTS], configPath: "./bench/wrangler.toml" }, shared),
        {
          // The house rules themselves (import layers), from Node: each broken on purpose.
          test: { name: "house", environment: "node", include: ["test/house/**/*.test.ts"], testTimeout: 60_000 },
        },
        {
          // `npm run dev` and the CLI exactly as a person runs them, from Node.
          test: {
            name: "e2e",
            environment: "node",
            // The local databases with every migration applied, copied into each dev server's state.
            globalSetup: ["./test/setup/dev-template.global.ts"],
            include: ["test/e2e/**/*.test.ts"],
            testTimeout: 120_000,
            hookTimeout: 120_000,
          },
        },
      ],
    },
  };
});

/** Vite's caches (the pre-bundled dependencies, the last run's durations) in this clone, not in node_modules. */
const CACHE_DIR = ".cache/vite";
/** The settlement lanes test runs in a project of its own: its Worker has several gas keys. */
const LANES_TEST = "test/x402/lanes.test.ts";
/**
 * The settler's tests that run once more with batched settlement (another send path of the built-in
 * settler: one transaction for several authorizations, each outcome read from the token's logs), and
 * the ones that only make sense batched. Outcomes a facilitator reports (facilitator-outcomes) cannot
 * change with batching and run once.
 */
const BATCH_ONLY_TESTS = "test/x402/batch.test.ts";
const BATCH_TESTS = [
  "test/x402/races.test.ts",
  "test/x402/settle-outcomes.test.ts",
  BATCH_ONLY_TESTS,
  // Outbound transfers sent in the lanes' batches: payouts' crash seams, races and recorded block, and
  // x402 refunds, unchanged.
  "test/payouts/faults.test.ts",
  "test/payouts/races.test.ts",
  "test/payouts/recorded-block.test.ts",
  "test/refunds/x402-refunds.test.ts",
];
/** Payouts in settlement batches, in a project of their own (see PAYOUTS_BATCH_VARS). */
const PAYOUTS_BATCH_TESTS = "test/payouts/batch.test.ts";
/** The treasury tests run in a project of their own (see TREASURY_VARS). */
const TREASURY_TESTS = "test/treasury/**";
/**
 * A treasury of its own for a project: test-only keys, fixed so the config can name them (the tests
 * fund them with gas on the local chain), and a deposit mnemonic no other project derives from.
 */
function treasuryVars(name: string, mnemonic: string) {
  const settlementKey = keccak256(stringToHex(`agent-pay test ${name} settlement key`));
  return {
    X402_PAY_TO: privateKeyToAddress(settlementKey),
    SETTLEMENT_PRIVATE_KEY: settlementKey,
    FACILITATOR_PRIVATE_KEY: keccak256(stringToHex(`agent-pay test ${name} gas key`)),
    DEPOSIT_MNEMONIC: mnemonic,
  };
}
const TREASURY_VARS = treasuryVars(
  "treasury",
  "legal winner thank year wave sausage worth useful legal winner thank yellow",
);
const TREASURY_SHARDS_VARS = treasuryVars(
  "two-shard treasury",
  "frost coconut depart corn gauge scrub razor sugar faculty giant width sick",
);
const PAYOUTS_BATCH_VARS = treasuryVars("payouts batch", "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong");
/** The ledger-shard tests run with two shards (DB and DB_SHARD_1), new owners placed on either. */
const SHARDS_TESTS = "test/shards/**/*.test.ts";
/** Scripted worlds whose every answer is written out: run with one shard (workers) and with two. */
const SAME_WORLD_TESTS = "test/worlds/**/*.test.ts";
const SHARDS_VARS = { LEDGER_SHARDS: "2", LEDGER_SHARD_PLACEMENT: "spread" };
/** The two-shard tests of batched x402 settlement, in a project of their own (settlements batched). */
const SHARDS_BATCH_TESTS = "test/shards/x402-batch.test.ts";
/** The runtime floors' tests run against the bench's own Worker, which the service's bundle does not hold. */
const BENCH_TESTS = "test/bench/**";

/** The Worker itself inside workerd, with real D1, Durable Objects and Queues, and a real local chain. */
function workersProject(
  name: string,
  options: {
    include: string[];
    exclude?: string[];
    /** How many gas keys (settlement lanes) the Worker has: 1 unless said. */
    gasKeys?: number;
    /** Settle x402 payments in batches (X402_SETTLEMENT_BATCH_ADDRESS). */
    batched?: boolean;
    configPath?: string;
    /** Bindings that replace the shared ones. */
    vars?: Record<string, string>;
    /** The chain's provider limits, over the run's (TEST_RPC_LIMITS, TEST_CHAIN_HISTORY). */
    chainLimits?: ChainLimits;
  },
  shared: { migrations: Awaited<ReturnType<typeof readD1Migrations>>; seed: number; chainLimits: ChainLimits },
) {
  return {
    cacheDir: CACHE_DIR,
    plugins: [
      // Called for each test file (each runs in a Worker of its own): the file's gas keys are its own.
      cloudflareTest(async ({ inject }) => ({
        wrangler: { configPath: options.configPath ?? "./wrangler.toml" },
        miniflare: {
          bindings: {
            ENVIRONMENT: "test",
            CONSOLE_SESSION_SECRET: "test-only-console-session-secret-0123456789abcdef",
            WEBHOOK_SECRETS_KEY: "test-only-webhook-secrets-key-0123456789abcdef",
            // Receipts and checkpoints are signed with key 1; key 0 stands for a key rotated out, still published.
            RECEIPT_SIGNING_KEY: JSON.stringify(TEST_RECEIPT_KEYS[1]),
            RECEIPT_PUBLISHED_KEYS: JSON.stringify([{ ...TEST_RECEIPT_KEYS[0], d: undefined }]),
            // Retries without waiting, so a test sees the whole schedule in moments.
            WEBHOOK_RETRY_SCHEDULE: "0,0,0,0",
            WEBHOOK_TIMEOUT_MS: "2000",
            // Webhook hosts are resolved before each POST through the receiver's DNS-over-HTTPS stand-in.
            WEBHOOK_DNS_RESOLVER_URL: `${inject<string>("receiverUrl")}/dns-query`,
            ...inject<{ vars: Record<string, string> }>("chain").vars,
            FACILITATOR_PRIVATE_KEY: await freshGasKeys(
              inject<{ rpcUrl: string }>("chain").rpcUrl,
              options.gasKeys ?? 1,
            ),
            ...(options.batched
              ? { X402_SETTLEMENT_BATCH_ADDRESS: inject<{ settlementBatch: string }>("chain").settlementBatch }
              : {}),
            X402_FACILITATOR_TIMEOUT_MS: "3000",
            DEPOSIT_MNEMONIC:
              "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
            DEPOSIT_CONFIRMATIONS: "2",
            // Cloudflare Access sign-in against a locally generated key set (test/setup/receiver.global.ts).
            ACCESS_TEAM_DOMAIN: "agent-pay-test.cloudflareaccess.com",
            ACCESS_AUD: "test-access-aud",
            ACCESS_CERTS_URL: `${inject<string>("receiverUrl")}/access/certs`,
            TEST_MIGRATIONS: shared.migrations,
            ...options.vars,
          },
        },
      })),
    ],
    test: {
      name,
      globalSetup: ["./test/setup/receiver.global.ts", "./test/setup/chain.global.ts"],
      setupFiles: ["./test/setup/apply-migrations.ts"],
      provide: { seed: shared.seed, chainLimits: { ...shared.chainLimits, ...options.chainLimits } },
      include: options.include,
      exclude: options.exclude ?? [],
      testTimeout: 60_000,
      hookTimeout: 60_000,
      deps: {
        optimizer: {
          ssr: {
            enabled: true,
            include: [
              "viem",
              "viem/accounts",
              "zod",
              "hono",
              "hono/body-limit",
              "hono/cookie",
              "hono/cors",
              "hono/factory",
              "hono/html",
              "hono/http-exception",
              "hono/jsx",
              "hono/jsx/jsx-runtime",
              "hono/jsx/jsx-dev-runtime",
              "hono/utils/http-status",
              "drizzle-orm",
              "drizzle-orm/d1",
              "drizzle-orm/sqlite-core",
              "jose",
              "@scure/bip39",
              "@hono/zod-validator",
              "@scalar/hono-api-reference",
              "@modelcontextprotocol/sdk/server/index.js",
              "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js",
              "@modelcontextprotocol/sdk/types.js",
              "@modelcontextprotocol/sdk/client/index.js",
              "@modelcontextprotocol/sdk/client/streamableHttp.js",
              "fast-check",
              "@cfworker/json-schema",
            ],
          },
        },
      },
    },
  };
}
