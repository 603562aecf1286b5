import { outstandingAuthorizations } from "../../agents/x402-life";
import { type RpcAnswer, rpcBatch, tokenCall } from "../../chain/client";
import type { Env, X402Settings } from "../../config/env";

/** Whether the settlement address can cover one more authorization, and the head it was read at. */
export type Cover = { kind: "covered"; block: number } | { kind: "short" } | { kind: "unavailable" };

const failed = (answer: RpcAnswer | undefined) => !answer || !!answer.error;

/** The settlement address's token balance as the chain gave it, and when it was asked. */
interface BalanceRead {
  /** Worker time just before the read was sent: anything recorded settled since may not be in it. */
  askedAt: number;
  balance: bigint;
  block: number;
}

/** How long one read of the balance serves the checks after it (the settlements recorded since are subtracted). */
const BALANCE_FRESH_MS = 2_000;
/** How far back of a read's time settlements are counted: other isolates' clocks may run a little apart. */
const CLOCK_MARGIN_MS = 5_000;
const balanceReads = new Map<string, Promise<BalanceRead | null>>();
const balanceKept = new Map<string, BalanceRead>();

/** The balance read at most BALANCE_FRESH_MS before `now` in this isolate, or a new read (shared by the checks waiting on it). */
function settlementBalance(x: X402Settings, now: number): Promise<BalanceRead | null> {
  const key = `${x.rpcUrl}|${x.asset}|${x.payTo}`;
  const kept = balanceKept.get(key);
  if (kept && now - kept.askedAt < BALANCE_FRESH_MS) return Promise.resolve(kept);
  const reading = balanceReads.get(key);
  if (reading) return reading;
  const read = (async () => {
    try {
      const askedAt = Date.now();
      const calls = [tokenCall(x, "balanceOf", [x.payTo]), { method: "eth_blockNumber", params: [] }];
      const [balance, head] = await rpcBatch(x, calls);
      if (failed(balance) || failed(head)) return null;
      const got = {
        askedAt,
        balance: BigInt((balance!.result as string) || "0x0"),
        block: Number(BigInt(head!.result as string)),
      };
      balanceKept.set(key, got);
      return got;
    } catch {
      return null;
    } finally {
      balanceReads.delete(key);
    }
  })();
  balanceReads.set(key, read);
  return read;
}

/**
 * Whether the settlement address's token balance, less what its outstanding authorizations (every
 * shard's payments still `authorized`) may still take, covers the claim's amount. The balance is
 * read from the chain at most every BALANCE_FRESH_MS per isolate (a real provider's rate limit would
 * not take one call per payment); what it has not seen leave is subtracted: every authorization
 * still outstanding, and every one recorded settled since the read was asked (less a clock margin).
 * The ledger is read after the balance, so an authorization used on chain before the read and not
 * yet recorded, or recorded since, is subtracted twice: that errs toward refusing, never toward
 * promising what is not there. Claims of this isolate count each other (below); other isolates'
 * checks at the same moment do not (docs/decisions.md).
 */
export async function settlementCover(
  env: Env,
  x: X402Settings,
  claim: CoverClaim,
  /** The worker's time now (a test names a moment while the read it made is still fresh). */
  now = Date.now(),
): Promise<Cover> {
  // Taken before the ledger is read: a claim among these that commits meanwhile is counted twice
  // (as outstanding and as claimed), which errs toward refusing; one made after this read counts this one.
  const claimedBefore = claim.before();
  const read = await settlementBalance(x, now);
  if (!read) return { kind: "unavailable" };
  const outstanding = await outstandingAuthorizations(env, new Date(read.askedAt - CLOCK_MARGIN_MS).toISOString());
  const available = read.balance - outstanding.totalBaseUnits - outstanding.settledSinceBaseUnits - claimedBefore;
  if (available < claim.amount) return { kind: "short" };
  return { kind: "covered", block: read.block };
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
