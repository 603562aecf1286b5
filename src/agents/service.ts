import { hashApiKey } from "../auth/credentials";
import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import type { agents } from "../db/schema";
import { executeBatch, nothingMore, type SqlStatement, sqlStatement, type WithCreated } from "../db/statements";
import { directoryEntry } from "../ledger/directory";
import { BALANCE_COLUMNS, withHomeFields, writeHomeRow } from "../ledger/home-rows";
import { placementOf } from "../ledger/place";
import { canonicalJson } from "../lib/canonical-json";
import { CONTROL_IDS, newId, newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";
import { depositAddressAt, ensureDepositAddress } from "./deposit-address";
import { type Policy, parseStoredPolicy } from "./policy";

/** An agent row as read: its exact balance a decimal string (BALANCE_COLUMNS). */
export type AgentRow = Omit<typeof agents.$inferSelect, "balanceBaseUnits"> & { balanceBaseUnits: string };

/** An agent's columns named as in AgentRow. */
const AGENT_ROW = `SELECT id, name, api_key_hash AS apiKeyHash, previous_api_key_hash AS previousApiKeyHash,
  previous_key_expires_at AS previousKeyExpiresAt, frozen_at AS frozenAt, frozen_reason AS frozenReason,
  ${BALANCE_COLUMNS}, currency, policy, deposit_index AS depositIndex, deposit_address AS depositAddress,
  created_at AS createdAt FROM agents`;

/** The console's agent object (docs/api.md, Agents and policies). */
export const agentView = (a: AgentRow) => ({
  agentId: a.id,
  name: a.name,
  balanceMinor: a.balanceMinor,
  balanceBaseUnits: a.balanceBaseUnits,
  currency: a.currency,
  policy: parseStoredPolicy(a.policy),
  /** Where stablecoin sent on chain is credited to this wallet; null when deposits are not configured. */
  depositAddress: a.depositAddress,
  /** Frozen: nothing of its money moves until a console user unfreezes it. */
  frozen: a.frozenAt !== null,
  frozenReason: a.frozenReason,
  createdAt: a.createdAt,
});

/** Creates an agent; its `svc_sk_` key is returned once and only its hash is kept. */
/** Attempts at taking the next deposit index when concurrent creations take it first (each round one of them wins). */
const DEPOSIT_INDEX_ATTEMPTS = 50;

export interface CreatedAgent {
  agentId: string;
  apiKey: string;
  policy: Policy;
  depositAddress: string | null;
}

/**
 * Creates an agent with its deposit address (when deposits are configured) in
 * one batch, with what must commit beside it (its stored idempotent answer).
 * The next derivation index is read, the address derived from it, and the
 * insert relies on the unique index on `deposit_index`: a creation that lost
 * the index to a concurrent one takes the next.
 */
export async function createAgent(
  env: Env,
  db: D1Database,
  input: { name: string; policy: Policy },
  withCreated: WithCreated<CreatedAgent> = nothingMore,
): Promise<CreatedAgent> {
  const agentId = newId("agent", CONTROL_IDS);
  const apiKey = newSecret("agentKey");
  const row = {
    id: agentId,
    name: input.name,
    apiKeyHash: await hashApiKey(apiKey),
    policy: canonicalJson(input.policy),
    createdAt: nowIso(),
  };
  const place = placementOf(env);
  const home = place.forNewOwner();
  await writeHomeRow("agent", home, row);
  const mnemonic = settingsOf(env).x402?.receivingMnemonic;
  for (let attempt = 1; ; attempt++) {
    let deposit: { depositIndex: number; depositAddress: string } | null = null;
    if (mnemonic) {
      const next = await place.control.db
        .prepare("SELECT COALESCE(MAX(deposit_index), -1) + 1 AS next FROM agents")
        .first<{ next: number }>();
      deposit = { depositIndex: next!.next, depositAddress: depositAddressAt(mnemonic, next!.next).toLowerCase() };
    }
    const created = { agentId, apiKey, policy: input.policy, depositAddress: deposit?.depositAddress ?? null };
    try {
      await executeBatch(db, [
        sqlStatement(
          `INSERT INTO agents (id, name, api_key_hash, policy, created_at, deposit_index, deposit_address)
           VALUES (?, ?, ?, ?, ?, ?, ?)`,
          row.id,
          row.name,
          row.apiKeyHash,
          row.policy,
          row.createdAt,
          deposit?.depositIndex ?? null,
          deposit?.depositAddress ?? null,
        ),
        directoryEntry("agent", agentId, home, row.createdAt),
        ...(await withCreated(created)),
      ]);
      return created;
    } catch (error) {
      const lostTheIndex = /UNIQUE constraint failed: agents\.deposit_(index|address)/.test(String(error));
      if (!lostTheIndex || attempt >= DEPOSIT_INDEX_ATTEMPTS) throw error;
    }
  }
}

export const getAgent = (db: D1Database, id: string) =>
  db.prepare(`${AGENT_ROW} WHERE id = ?`).bind(id).first<AgentRow>();

/** How many agents there are (the console's overview, in its batch). */
export const agentCount = (): SqlStatement => sqlStatement("SELECT COUNT(*) AS n FROM agents");

export const listAgents = async (db: D1Database, limit: number) =>
  (await db.prepare(`${AGENT_ROW} ORDER BY created_at DESC, rowid DESC LIMIT ?`).bind(limit).all<AgentRow>()).results;

/** An agent as the console shows it: its money and freeze from its home shard. */
export const getAgentAtHome = async (env: Env, db: D1Database, id: string) => {
  const agent = await getAgent(db, id);
  return agent && (await withHomeFields(env, "agent", [agent]))[0]!;
};

/** The newest agents as the console lists them: their money and freezes from their home shards. */
export const listAgentsAtHome = async (env: Env, db: D1Database, limit: number) =>
  withHomeFields(env, "agent", await listAgents(db, limit));

/** The agent's own view of its wallet (GET /balance), its deposit address assigned on first sight; null for an unknown agent. */
export async function balanceView(env: Env, db: D1Database, agentId: string) {
  const agent = await getAgent(db, agentId);
  if (!agent) return null;
  const depositAddress = agent.depositAddress ?? (await ensureDepositAddress(env, agent.id));
  // Money and the freeze are the home row's (the control row is that row in shard 0).
  const at = await placementOf(env).ofAgent(agentId);
  const home = at.isControl ? agent : await getAgent(at.db, agentId);
  return {
    agentId: agent.id,
    balanceMinor: home?.balanceMinor ?? 0,
    balanceBaseUnits: home?.balanceBaseUnits ?? "0",
    currency: agent.currency,
    depositAddress,
    frozen: (home?.frozenAt ?? null) !== null,
  };
}
