import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      projects: [
        {
          // The Worker itself inside workerd, with real D1, Durable Objects and Queues, and a real local chain.
          plugins: [
            cloudflareTest(({ inject }) => ({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  ENVIRONMENT: "test",
                  CONSOLE_SESSION_SECRET: "test-only-console-session-secret-0123456789abcdef",
                  WEBHOOK_SECRETS_KEY: "test-only-webhook-secrets-key-0123456789abcdef",
                  // Retries without waiting, so a test sees the whole schedule in moments.
                  WEBHOOK_RETRY_SCHEDULE: "0,0,0,0",
                  WEBHOOK_TIMEOUT_MS: "2000",
                  // Webhook hosts are resolved before each POST through the receiver's DNS-over-HTTPS stand-in.
                  WEBHOOK_DNS_RESOLVER_URL: `${inject<string>("receiverUrl")}/dns-query`,
                  ...inject<{ vars: Record<string, string> }>("chain").vars,
                  X402_FACILITATOR_TIMEOUT_MS: "3000",
                  DEPOSIT_MNEMONIC: "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
                  DEPOSIT_CONFIRMATIONS: "2",
                  // Cloudflare Access sign-in against a locally generated key set (test/setup/receiver.global.ts).
                  ACCESS_TEAM_DOMAIN: "agent-pay-test.cloudflareaccess.com",
                  ACCESS_AUD: "test-access-aud",
                  ACCESS_CERTS_URL: `${inject<string>("receiverUrl")}/access/certs`,
                  TEST_MIGRATIONS: migrations,
                },
              },
            })),
          ],
          test: {
            name: "workers",
            globalSetup: ["./test/setup/receiver.global.ts", "./test/setup/chain.global.ts"],
            setupFiles: ["./test/setup/apply-migrations.ts"],
            include: ["test/**/*.test.ts"],
            exclude: ["test/e2e/**"],
            testTimeout: 60_000,
            hookTimeout: 60_000,
          },
        },
        {
          // `npm run dev` and the CLI exactly as a person runs them, from Node.
          test: {
            name: "e2e",
            environment: "node",
            include: ["test/e2e/**/*.test.ts"],
            testTimeout: 120_000,
            hookTimeout: 120_000,
          },
        },
      ],
    },
  };
});
