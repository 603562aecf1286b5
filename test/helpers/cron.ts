import { createExecutionContext, createMessageBatch, createScheduledController } from "cloudflare:test";
import type { Env } from "../../src/config/env";
import worker from "../../src/index";
import type { JobMessage } from "../../src/jobs/minute";

/**
 * One minute of the cron as production runs it: the Worker's scheduled handler sends its jobs'
 * messages, and each is handed to the Worker's queue handler as a batch of its own (the jobs
 * queue's max_batch_size), all with `env`, so a test's changed settings reach every job. The
 * messages are caught on their way to the queue, so the local consumer does not run them a second
 * time behind the test's back. Answers the messages sent.
 */
export async function cronTick(env: Env): Promise<JobMessage[]> {
  const sent: JobMessage[] = [];
  const jobsQueue = {
    send: async (body: JobMessage) => void sent.push(body),
    sendBatch: async (messages: Iterable<{ body: JobMessage }>) => {
      for (const m of messages) sent.push(m.body);
    },
  } as unknown as Queue;
  const withJobs = { ...env, JOBS_QUEUE: jobsQueue } as Env;
  await worker.scheduled!(
    createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() }),
    withJobs,
    createExecutionContext(),
  );
  await Promise.all(
    sent.map(async (body, i) => {
      const batch = createMessageBatch<JobMessage>("agent-pay-jobs", [
        { id: `job-${i}`, timestamp: new Date(), attempts: 1, body },
      ]);
      await worker.queue!(batch as MessageBatch, withJobs);
    }),
  );
  return sent;
}
