import type { Env } from "../config/env";
import { envOfOnePlace, placementOf } from "../ledger/place";
import { shardLabel } from "../ledger/shard-labels";
import { countedEnv } from "../lib/counted-env";
import { Invocation, runInvocation } from "../lib/invocation";
import { log } from "../lib/log";
import { dispatchOutbox } from "../webhooks/dispatch";
import { CRON_JOBS } from "./table";

/** A message of the jobs queue: one job, for one place (a shard's label) when the job runs per place. */
export interface JobMessage {
  job: string;
  place?: number;
}

/** Messages one `sendBatch` carries at most (the queue's own limit). */
const SEND_BATCH = 100;

/**
 * The minute cron's trigger: a message per job (per job and place for those that walk every ledger
 * shard) onto the jobs queue, whose consumer runs each in an invocation of its own. The trigger
 * itself reads nothing and costs a send per hundred messages.
 */
export async function enqueueMinuteJobs(env: Env): Promise<JobMessage[]> {
  const places = placementOf(env).each();
  const messages: JobMessage[] = Object.entries(CRON_JOBS).flatMap(([job, spec]) =>
    spec.each === "place" ? places.map((at) => ({ job, place: shardLabel(at) })) : [{ job }],
  );
  for (let i = 0; i < messages.length; i += SEND_BATCH)
    await env.JOBS_QUEUE.sendBatch(messages.slice(i, i + SEND_BATCH).map((body) => ({ body })));
  return messages;
}

/**
 * The jobs queue's consumer: each message's job in an invocation of its own, with every binding
 * counted. A job that throws is logged as an error naming it, and its message is acknowledged all
 * the same: the jobs are idempotent and the next minute runs each again, so a retry would only run
 * it twice in one minute (and a job failing on every run would retry in a storm).
 */
export async function consumeJobs(batch: MessageBatch<JobMessage>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    await runInvocation(new Invocation(), () => runJob(message.body, env));
    message.ack();
  }
}

/** One job's run (and, for one that writes events, its fan-out), in the current invocation. */
export async function runJob({ job, place }: JobMessage, env: Env): Promise<void> {
  const spec = CRON_JOBS[job];
  const counted = countedEnv(env);
  const jobEnv = place === undefined ? counted : envOfOnePlace(counted, place);
  if (!spec || !jobEnv || (spec.each === "place") !== (place !== undefined)) {
    log.error("cron", { job, place, error: "unknown job or place" });
    return;
  }
  try {
    await spec.run(jobEnv);
    if (spec.events) await dispatchOutbox(jobEnv);
  } catch (error) {
    log.error("cron", { job, place, error });
  }
}
