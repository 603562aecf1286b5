import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { serialQueue } from "../lib/serial";
import type { Policy } from "./policy";
import type { DepositTransfer } from "../ledger/movements";
import type { SqlStatement } from "../ledger/plan";
import { creditDeposit, creditWallet, drawFromWallet, grantApproval, payCharge, payNewCharge, setPolicy, type PayableSnapshot } from "./wallet";

/**
 * One per agent (named by the agent id). Every mutation of the agent's wallet
 * runs here, one at a time: reads, the policy decision and the commit of one
 * operation finish before the next begins, so checks and writes never interleave.
 */
export class WalletDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();

  payCharge(agentId: string, chargeId: string) {
    return this.serialize(() => payCharge(this.env, agentId, chargeId));
  }

  payNewCharge(agentId: string, charge: PayableSnapshot, birthGuards: SqlStatement[]) {
    return this.serialize(() => payNewCharge(this.env, agentId, charge, birthGuards));
  }

  drawFromWallet(agentId: string, charge: PayableSnapshot, grantStatements: SqlStatement[], auditData: Record<string, string | number | null>) {
    return this.serialize(() => drawFromWallet(this.env, agentId, charge, grantStatements, auditData));
  }

  grantApproval(agentId: string, approvalId: string, decidedBy: string) {
    return this.serialize(() => grantApproval(this.env, agentId, approvalId, decidedBy));
  }

  credit(agentId: string, amountMinor: number, reference: string | null, by: string) {
    return this.serialize(() => creditWallet(this.env, agentId, amountMinor, reference, by));
  }

  creditDeposit(transfer: DepositTransfer, credit: boolean) {
    return this.serialize(() => creditDeposit(this.env, transfer, credit));
  }

  setPolicy(agentId: string, policy: Policy) {
    return this.serialize(() => setPolicy(this.env, agentId, policy));
  }
}

export const walletOf = (env: Env, agentId: string) => env.WALLET.getByName(agentId);
