import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { Invocation, runInvocation } from "../../src/lib/invocation";
import { consumeDeliveries, DELIVERIES_IN_FLIGHT } from "../../src/webhooks/consumer";
import { fanOutOutbox } from "../../src/webhooks/dispatch";
import { receiverUrl, registerEndpoint } from "../helpers/webhooks";

/*
 * A queue batch of 10 deliveries against an invocation's 6 connections: the consumer has at most
 * DELIVERIES_IN_FLIGHT POSTs under way, each timed from its send, so a receiver that answers
 * slowly but within the timeout (paced-*: 1.2 s, the timeout here is 2 s) gets every one recorded
 * delivered, although the batch as a whole takes longer than the timeout. The local receiver
 * (test/setup/receiver.global.ts) counts how many were unanswered at once.
 */

const RUN = crypto.randomUUID().slice(0, 8);

/** A batch as the queue hands it to the consumer, recording each message's ack or retry. */
function batchOf(deliveryIds: string[]) {
  const settled: Record<string, "ack" | "retry"> = {};
  const messages = deliveryIds.map((deliveryId, i) => ({
    id: `msg-${i}`,
    timestamp: new Date(),
    attempts: 1,
    body: { deliveryId },
    ack: () => {
      settled[deliveryId] = "ack";
    },
    retry: () => {
      settled[deliveryId] = "retry";
    },
  }));
  const batch = { queue: "agent-pay-webhooks", messages, ackAll: () => {}, retryAll: () => {} };
  return { batch: batch as unknown as MessageBatch<unknown>, settled };
}

describe("the webhook consumer within the connection limit", () => {
  it("a batch of 10 to a slowish endpoint is delivered whole, never timed out, a bounded number at once", async () => {
    const name = `paced-parallel-${RUN}`;
    await registerEndpoint(name);
    const createdAt = new Date().toISOString();
    const events = Array.from({ length: 10 }, (_, i) => `evt_wh_parallel_${RUN}_${i}`);
    await env.DB.batch(
      events.map((id, i) =>
        env.DB.prepare(
          "INSERT INTO outbox_events (id, type, merchant_id, data, created_at) VALUES (?, ?, ?, ?, ?)",
        ).bind(
          id,
          "charge.created",
          null,
          JSON.stringify({ chargeId: `chg_parallel_${RUN}_${i}`, amountMinor: i + 1 }),
          createdAt,
        ),
      ),
    );
    // Fanned out but not enqueued: this test hands the batch to the consumer itself.
    const deliveryIds = await fanOutOutbox(env);
    expect(deliveryIds).toHaveLength(10);

    const { batch, settled } = batchOf(deliveryIds);
    await runInvocation(new Invocation(), () => consumeDeliveries(batch, env));

    expect(Object.values(settled)).toEqual(Array(10).fill("ack"));
    const { results } = await env.DB.prepare(
      `SELECT d.status, a.error FROM webhook_deliveries d JOIN webhook_attempts a ON a.delivery_id = d.id
       WHERE d.id IN (SELECT value FROM json_each(?))`,
    )
      .bind(JSON.stringify(deliveryIds))
      .all<{ status: string; error: string | null }>();
    expect(results).toEqual(Array(10).fill({ status: "delivered", error: null }));
    const counts = (await (await fetch(`${receiverUrl()}/inflight/${name}`)).json()) as { now: number; max: number };
    // Side by side, but never more than the bound.
    expect(counts.max).toBeGreaterThan(1);
    expect(counts.max).toBeLessThanOrEqual(DELIVERIES_IN_FLIGHT);
  });
});
