import type { Env } from "../config/env";
import type { FaultContext } from "../lib/faults";
import { log } from "../lib/log";
import { driveTransfer, type TransferState } from "./transfer-drive";

/** Remembers a transfer in flight where an alarm drives it if the turn that sent it does not finish. */
export interface TransferIntents {
  remember(id: string, from: number): Promise<void>;
  done(id: string): Promise<void>;
}

/** Storage key prefix of a transfer in flight. */
const INTENT = "xfer:";
interface Intent {
  from: number;
  at: number;
}
/** How long a transfer in flight waits before the alarm drives it again. */
export const TRANSFER_RETRY_MS = 30_000;

/** Runs `work` in the turn of the object that keeps the transfers (its agent's, ordered with its payments). */
export type InTurn = <T>(work: () => Promise<T>) => Promise<T>;

/**
 * The transfers between shards an object (the paying agent's wallet) has in flight, kept in its
 * storage (`xfer:<id>` → the sending shard and when) with an alarm, so one a crash interrupts is
 * driven again when the alarm fires (`drive`). The minute cron is the backstop (transfer-recovery.ts).
 */
export class TransfersInFlight implements TransferIntents {
  constructor(private readonly storage: DurableObjectStorage) {}

  async remember(id: string, from: number): Promise<void> {
    await this.storage.put(`${INTENT}${id}`, { from, at: Date.now() } satisfies Intent);
    await this.alarmBy(Date.now() + TRANSFER_RETRY_MS);
  }

  async done(id: string): Promise<void> {
    await this.storage.delete(`${INTENT}${id}`);
  }

  private async alarmBy(at: number): Promise<void> {
    const current = await this.storage.getAlarm();
    if (current === null || at < current) await this.storage.setAlarm(at);
  }

  /**
   * Drives every transfer remembered, in `turn`. One whose send never landed is forgotten once it is
   * old enough that its batch cannot still be in the ledger's queue (the cron would find it if it
   * landed after all). Answers when the alarm is due again for the transfers left, or null when none
   * is; a drive that fails outright is logged and retried then.
   */
  async drive(env: Env, turn: InTurn, context: FaultContext): Promise<number | null> {
    try {
      const intents = await this.storage.list<Intent>({ prefix: INTENT });
      if (intents.size === 0) return null;
      const left = await turn(async () => {
        let left = false;
        for (const [key, { from, at }] of intents) {
          const state = await driveLogged(env, from, key.slice(INTENT.length), context);
          const over = state?.status === "completed" || state?.status === "reversed";
          if (over || (state?.status === "absent" && Date.now() - at > TRANSFER_RETRY_MS))
            await this.storage.delete(key);
          else left = true;
        }
        return left;
      });
      return left ? Date.now() + TRANSFER_RETRY_MS : null;
    } catch (error) {
      log.warn("transfer_intents", { error });
      return Date.now() + TRANSFER_RETRY_MS;
    }
  }
}

/** Drives one transfer; a failure to read or write a shard is logged and leaves it to the next driver. */
export async function driveLogged(
  env: Env,
  from: number,
  id: string,
  context: FaultContext,
): Promise<TransferState | null> {
  try {
    return await driveTransfer(env, from, id, context);
  } catch (error) {
    log.warn("transfer_drive", { id, from, error });
    return null;
  }
}
