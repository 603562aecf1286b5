import { desc, eq, sql } from "drizzle-orm";
import { hashApiKey } from "../auth/credentials";
import type { Db } from "../db/client";
import { agents } from "../db/schema";
import { newId, newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";
import { canonicalJson } from "../ledger/audit";
import { parseStoredPolicy, type Policy } from "./policy";
import type { Env } from "../env";
import { ensureDepositAddress } from "../deposits/addresses";

export type AgentRow = typeof agents.$inferSelect;

/** The console's agent object (operations section 2). */
export const agentView = (a: AgentRow) => ({
  agentId: a.id,
  name: a.name,
  balanceMinor: a.balanceMinor,
  currency: a.currency,
  policy: parseStoredPolicy(a.policy),
  /** Where stablecoin sent on chain is credited to this wallet; null when deposits are not configured. */
  depositAddress: a.depositAddress,
  createdAt: a.createdAt,
});

/** Creates an agent; its `svc_sk_` key is returned once and only its hash is kept. */
export async function createAgent(db: Db, input: { name: string; policy: Policy }) {
  const agentId = newId("agent");
  const apiKey = newSecret("agentKey");
  await db.insert(agents).values({
    id: agentId,
    name: input.name,
    apiKeyHash: await hashApiKey(apiKey),
    policy: canonicalJson(input.policy),
    createdAt: nowIso(),
  });
  return { agentId, apiKey, policy: input.policy };
}

export const getAgent = (db: Db, id: string) => db.select().from(agents).where(eq(agents.id, id)).get();

export const listAgents = (db: Db, limit: number) => db.select().from(agents).orderBy(desc(agents.createdAt), desc(sql`rowid`)).limit(limit).all();

/** The agent's own view of its wallet (GET /balance), its deposit address assigned on first sight; null for an unknown agent. */
export async function balanceView(env: Env, db: Db, agentId: string) {
  const agent = await getAgent(db, agentId);
  if (!agent) return null;
  const depositAddress = agent.depositAddress ?? (await ensureDepositAddress(env, agent.id));
  return { agentId: agent.id, balanceMinor: agent.balanceMinor, currency: agent.currency, depositAddress };
}
