import { outstandingAuthorizations } from "../../agents/x402-life";
import { type RpcAnswer, rpcBatch, tokenCall } from "../../chain/client";
import type { Env, X402Settings } from "../../config/env";

/** Whether the settlement address can cover one more authorization, and the head it was read at. */
export type Cover = { kind: "covered"; block: number } | { kind: "short" } | { kind: "unavailable" };

const failed = (answer: RpcAnswer | undefined) => !answer || !!answer.error;

/**
 * Whether the settlement address's token balance, less what its outstanding authorizations (every
 * shard's payments still `authorized`) may still take, covers `amount`. Read fresh on every payment,
 * never cached: a cached balance beside a fresh count would count a payment settled in between twice
 * in the agent's favour. The ledger is read before the chain: an authorization used on chain and not
 * yet recorded as settled is then subtracted twice (from the balance, and as outstanding), which errs
 * toward refusing, never toward promising what is not there. Two payments checked at the same moment
 * both see the other not yet recorded (docs/decisions.md).
 */
export async function settlementCover(env: Env, x: X402Settings, claim: CoverClaim): Promise<Cover> {
  // Taken before the ledger is read: a claim among these that commits meanwhile is counted twice
  // (as outstanding and as claimed), which errs toward refusing; one made after this read counts this one.
  const claimedBefore = claim.before();
  const outstanding = await outstandingAuthorizations(env);
  let answers: RpcAnswer[];
  try {
    answers = await rpcBatch(x, [tokenCall(x, "balanceOf", [x.payTo]), { method: "eth_blockNumber", params: [] }]);
  } catch {
    return { kind: "unavailable" };
  }
  const [balance, head] = answers;
  if (failed(balance) || failed(head)) return { kind: "unavailable" };
  const available = BigInt((balance!.result as string) || "0x0") - outstanding.totalBaseUnits - claimedBefore;
  if (available < claim.amount) return { kind: "short" };
  return { kind: "covered", block: Number(BigInt(head!.result as string)) };
}

/**
 * An authorization this isolate is checking or signing and has not yet committed (or dropped). Two
 * payments checked at once in one isolate could each see the other neither recorded nor claimed and
 * together promise more than the address holds; each claim counts every claim made before it, so of
 * any two, the later one counts the earlier. Isolates do not see each other's claims
 * (docs/decisions.md, "the treasury's cover").
 */
export interface CoverClaim {
  amount: bigint;
  /** The base units of this isolate's open claims made before this one. */
  before(): bigint;
  /** The claim ends: its payment committed (it is outstanding now) or was refused. */
  end(): void;
}

const openClaims = new Map<number, bigint>();
let nextClaim = 0;

export function claimCover(amount: bigint): CoverClaim {
  const id = nextClaim++;
  openClaims.set(id, amount);
  return {
    amount,
    before: () => {
      let sum = 0n;
      for (const [other, units] of openClaims) if (other < id) sum += units;
      return sum;
    },
    end: () => openClaims.delete(id),
  };
}
