import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

// Setup files run before each test file; applied migrations are recorded, so this is idempotent.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
// Ledger shard 1 runs the same migrations (every test Worker's configuration binds it).
if (!env.DB_SHARD_1) throw new Error("the test Worker has no DB_SHARD_1 binding");
await applyD1Migrations(env.DB_SHARD_1, env.TEST_MIGRATIONS);

// Every test file has a database of its own but all share one chain and one receiving key: start this
// file's receiving-address indexes at a random base, so two files never receive on the same address.
await env.DB.prepare(
  "INSERT INTO receiving_addresses (idx, owner_id, owner_kind, merchant_id, address, created_at) VALUES (?, 'test-index-base', 'test', 'none', NULL, '') ON CONFLICT DO NOTHING",
)
  .bind(Math.floor(Math.random() * 2 ** 30))
  .run();
