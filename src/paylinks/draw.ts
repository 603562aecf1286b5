import type { PayOutcome } from "../agents/outcomes";
import type { walletOf } from "../agents/wallet.do";
import { type ChargeView, newPendingCharge } from "../charges/service";
import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import { guard, sqlStatement } from "../db/statements";
import { outboxEvent } from "../ledger/outbox";
import { type Place, placementOf } from "../ledger/place";
import { budgetLeftCode } from "../lib/error-codes";
import { faultPoint } from "../lib/faults";
import type { HeldFigures } from "../lib/held-figures";
import { nowIso } from "../lib/time";
import { merchantLabelOf } from "../merchants/statements";

export interface DrawRequest {
  grantId: string;
  amountMinor: number;
  description: string | null;
}

export type DrawOutcome =
  | { kind: "paid"; charge: ChargeView; spentMinor: number; remainingMinor: number; exhausted: boolean }
  | Exclude<PayOutcome, { kind: "paid" } | { kind: "approval" }>;

export interface GrantState {
  id: string;
  paylinkId: string;
  agentId: string;
  merchantId: string;
  spentMinor: number;
  uses: number;
  budgetMinor: number;
  perChargeMinor: number | null;
  maxUses: number | null;
  expiresAt: string | null;
  merchantName: string;
  merchantCategory: string | null;
}

const GRANT_SELECT = `SELECT g.id, g.paylink_id AS paylinkId, g.agent_id AS agentId, g.merchant_id AS merchantId, g.spent_minor AS spentMinor,
  g.uses, g.budget_minor AS budgetMinor, p.per_charge_minor AS perChargeMinor, p.max_uses AS maxUses, p.expires_at AS expiresAt,
  ${merchantLabelOf("g.merchant_id")}
  FROM paylink_grants g JOIN paylinks p ON p.id = g.paylink_id WHERE g.id = ?`;

/**
 * The grant's own limits, in the order the draw table implies: states that
 * end the grant (409) before amounts that are merely too large (402).
 */
function checkGrant(grant: GrantState, amountMinor: number, now: number): DrawOutcome | null {
  const remaining = grant.budgetMinor - grant.spentMinor;
  if (grant.expiresAt !== null && grant.expiresAt <= nowIso(now))
    return { kind: "conflict", reason: "paylink_expired" };
  if (remaining <= 0) return { kind: "conflict", reason: "paylink_exhausted" };
  if (grant.maxUses !== null && grant.uses >= grant.maxUses) return { kind: "conflict", reason: "max_uses_alcanzado" };
  if (grant.perChargeMinor !== null && amountMinor > grant.perChargeMinor)
    return { kind: "rejected", reason: "excede_tope_por_uso" };
  if (amountMinor > remaining) return { kind: "rejected", reason: budgetLeftCode(remaining) };
  return null;
}

/** The refusal of a draw decided on figures that were not the committed ones when its batch ran. */
export const GRANT_CHANGED = "paylink_grant_changed";

/** A draw's turn in its grant object: the grant's remembered figures, and how to let the next draw start. */
export interface GrantTurn {
  figures: HeldFigures<GrantState>;
  /** The agent's wallet object: one stub for the grant's life, so its draws reach the wallet in the order they were decided. */
  wallet: (agentId: string) => ReturnType<typeof walletOf>;
  endTurn: () => void;
}

/** The grant as its draws see it: the committed figures plus the draws in flight. */
async function readGrant(home: Place, grantId: string, figures: HeldFigures<GrantState>): Promise<GrantState | null> {
  const view = await figures.read(
    async () => (await home.db.prepare(GRANT_SELECT).bind(grantId).first()) as GrantState | null,
  );
  return (
    view && {
      ...view.committed,
      // A grant's draws are whole cents: its holds count cents.
      spentMinor: view.committed.spentMinor + Number(view.held),
      uses: view.committed.uses + view.heldCount,
    }
  );
}

/**
 * One draw on a grant. Runs inside the grant's Durable Object, so draws on one
 * grant are decided one at a time: the grant's budget, cap, count and expiry
 * are checked, then the agent's wallet object applies hard limits and the
 * balance, and a single batch creates the paid charge, moves the money and the
 * grant's figures. The turn ends once the draw is handed to the wallet, so the
 * next draw is decided while this one commits, on figures that count it
 * (HeldFigures). The batch checks the exact figures the draw was decided on,
 * so its answer's figures are the committed ones and nothing is written on
 * any refusal; a draw decided on figures that an earlier draw then failed to
 * reach is refused with `paylink_grant_changed`, which the object decides again.
 */
export async function drawOnGrant(
  env: Env,
  request: DrawRequest,
  turn: GrantTurn,
  slot?: IdempotencySlot,
): Promise<DrawOutcome> {
  const now = Date.now();
  const { figures } = turn;
  // The grant lives with its PayLink, in the merchant's home, which its id names.
  const home = placementOf(env).ofId(request.grantId);
  const judge = async () => {
    const grant = home && (await readGrant(home, request.grantId, figures));
    return grant ? { grant, refused: checkGrant(grant, request.amountMinor, now) } : null;
  };
  const judged = await figures.decide(judge, (j) => j !== null && j.refused === null);
  if (!home || !judged) return { kind: "conflict", reason: "sin_grant_del_agente" };
  const { grant, refused } = judged;
  if (refused) return refused;
  return handToWallet(turn, grant, request, drawOf(home, grant, request, nowIso(now)), slot);
}

/** What a draw decided at `at` writes: its charge, and the grant's figures guarded as decided and moved. */
function drawOf(home: Place, grant: GrantState, request: DrawRequest, at: string) {
  const spentMinor = grant.spentMinor + request.amountMinor;
  const exhausted = spentMinor === grant.budgetMinor;
  const charge = {
    // Born in the grant's place (its merchant's home), with an id naming it.
    ...newPendingCharge(
      home,
      grant.merchantId,
      { amountMinor: request.amountMinor, description: request.description, paylinkGrantId: grant.id },
      at,
    ),
    merchantName: grant.merchantName,
    merchantCategory: grant.merchantCategory,
  };
  const grantStatements = [
    // The exact figures this draw was decided on: draws in flight before it must have committed.
    guard(
      GRANT_CHANGED,
      "EXISTS (SELECT 1 FROM paylink_grants WHERE id = ? AND spent_minor = ? AND uses = ?)",
      grant.id,
      grant.spentMinor,
      grant.uses,
    ),
    sqlStatement(
      "UPDATE paylink_grants SET spent_minor = spent_minor + ?, uses = uses + 1 WHERE id = ?",
      request.amountMinor,
      grant.id,
    ),
    ...(exhausted
      ? [
          outboxEvent(
            "budget.exhausted",
            grant.merchantId,
            { paylinkId: grant.paylinkId, grantId: grant.id, agentId: grant.agentId, spentMinor },
            at,
          ),
        ]
      : []),
  ];
  return { charge, grantStatements, result: { spentMinor, remainingMinor: grant.budgetMinor - spentMinor, exhausted } };
}

/**
 * Hands the draw to the agent's wallet and ends the grant's turn, its amount held in the grant's figures
 * until the wallet answers: committed, unchanged by a refusal, or unsure when the batch may have run.
 */
async function handToWallet(
  turn: GrantTurn,
  grant: GrantState,
  request: DrawRequest,
  draw: ReturnType<typeof drawOf>,
  slot: IdempotencySlot | undefined,
): Promise<DrawOutcome> {
  const { charge, grantStatements, result } = draw;
  const end = turn.figures.hold(BigInt(request.amountMinor), (committed) => {
    committed.spentMinor += request.amountMinor;
    committed.uses += 1;
  });
  let outcome: PayOutcome;
  try {
    faultPoint("draw.before_wallet");
    const drawing = turn.wallet(grant.agentId).drawFromWallet(
      grant.agentId,
      {
        charge,
        grantStatements,
        auditData: { paylinkId: grant.paylinkId, grantId: grant.id },
        view: { kind: "draw", ...result },
      },
      slot,
    );
    turn.endTurn();
    outcome = await drawing;
  } catch (error) {
    end("unsure");
    throw error;
  }
  if (outcome.kind !== "paid") {
    end(outcome.kind === "conflict" && outcome.reason === GRANT_CHANGED ? "unsure" : "unchanged");
    return outcome.kind === "approval" ? { kind: "conflict", reason: "unexpected_approval" } : outcome;
  }
  end("committed");
  faultPoint("draw.after_commit");
  return { kind: "paid", charge: outcome.charge, ...result };
}
