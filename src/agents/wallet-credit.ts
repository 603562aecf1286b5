import type { Env } from "../config/env";
import { PENDING_FIGURE, storeTemplateStatements } from "../db/idempotency";
import { agentCreditPlan, type DepositTransfer, depositPlan } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { balanceAfter } from "../ledger/postings";
import { canonicalJson } from "../lib/canonical-json";
import { newId } from "../lib/ids";
import { USDC_UNITS_PER_CENT } from "../lib/money";
import { nowIso } from "../lib/time";
import type { Policy } from "./policy";
import type { WalletCall } from "./wallet-state";

/** A manual top-up: how much, the operator's reference, and who made it. */
export interface WalletCredit {
  amountMinor: number;
  reference: string | null;
  by: string;
}

/** Credits the wallet from outside (a manual top-up), recorded in the ledger and the audit chain. */
export async function creditWallet(
  { env, agentId, slot }: WalletCall,
  { amountMinor, reference, by }: WalletCredit,
): Promise<{ ok: true; balanceMinor: number } | { ok: false; reason: string }> {
  // The answer names the balance after the credit; the batch writes it in (see storeTemplateStatements).
  const epilogue = slot
    ? storeTemplateStatements(
        slot,
        200,
        JSON.stringify(creditBody(PENDING_FIGURE)),
        "balanceMinor",
        "SELECT balance_minor FROM agents WHERE id = ?",
        agentId,
      )
    : [];
  const home = await placementOf(env).ofKnown("agent", agentId);
  if (home === null) return { ok: false, reason: "agent_not_found" };
  const result = await home.commit(
    agentCreditPlan({
      agentId,
      amountMinor,
      transferId: newId("credit", home),
      reference,
      by,
      createdAt: nowIso(),
      epilogue,
    }),
  );
  if (result.kind === "refused") {
    if (result.reason !== "credit_already_recorded") return { ok: false, reason: result.reason };
    // This very credit landed in a batch whose answer was lost, and the sequencer committed it again:
    // it is done once. Its exact balance after is in the answer that batch stored (with a key); this is the balance now.
    const row = await home.db
      .prepare("SELECT balance_minor AS balanceMinor FROM agents WHERE id = ?")
      .bind(agentId)
      .first<{ balanceMinor: number }>();
    if (!row) return { ok: false, reason: "agent_not_found" };
    return { ok: true, balanceMinor: row.balanceMinor };
  }
  return { ok: true, balanceMinor: balanceAfter(result.results, `agent:${agentId}`)! };
}

/** The answer to a credit. */
export const creditBody = (balanceMinor: number) => ({ balanceMinor });

/** Replaces the agent's policy; returns false if the agent does not exist. */
export async function setPolicy(env: Env, agentId: string, policy: Policy): Promise<boolean> {
  const home = await placementOf(env).ofKnown("agent", agentId);
  if (home === null) return false;
  // One write, to the home row: payments decide on its policy and agent views read it there
  // (withHomeFields). A second write to the control row could be lost to a crash between the two.
  const result = await home.db
    .prepare("UPDATE agents SET policy = ? WHERE id = ?")
    .bind(canonicalJson(policy), agentId)
    .run();
  return result.meta.changes > 0;
}

/**
 * Credits an on-chain deposit (or records it as blocked when the sender
 * failed screening). "duplicate" when this transfer was already recorded.
 */
export async function creditDeposit(
  env: Env,
  transfer: DepositTransfer,
  credit: boolean,
): Promise<"credited" | "blocked" | "duplicate"> {
  const amountMinor = Number(BigInt(transfer.value) / USDC_UNITS_PER_CENT);
  const home = await placementOf(env).ofAgent(transfer.agentId);
  const result = await home.commit(
    depositPlan({ ...transfer, depositId: newId("deposit", home), amountMinor, createdAt: nowIso() }, credit),
  );
  if (result.kind === "refused") return "duplicate";
  return credit ? "credited" : "blocked";
}
