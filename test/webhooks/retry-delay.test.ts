import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY_SCHEDULE, MAX_QUEUE_DELAY_SECONDS } from "../../src/config/env";
import { retryDelaySeconds } from "../../src/webhooks/consumer";

/*
 * The delay handed to `message.retry({ delaySeconds })`: the schedule's entry
 * ±20 %, never past the 12 h Cloudflare Queues allows (the default schedule
 * ends with 12 h entries, which the jitter alone would push to 14.4 h).
 */

/** Cloudflare Queues' longest `delaySeconds` (12 h), written out so the test does not take the code's word for it. */
const QUEUES_MAX_DELAY = 43_200;
const schedule = DEFAULT_RETRY_SCHEDULE.split(",").map(Number);
const top = schedule.indexOf(Math.max(...schedule));

describe("retryDelaySeconds", () => {
  it("the longest entry is the queue's limit, and so is the clamp", () => {
    expect(schedule[top]).toBe(QUEUES_MAX_DELAY);
    expect(MAX_QUEUE_DELAY_SECONDS).toBe(QUEUES_MAX_DELAY);
  });

  it("at the top of the schedule the highest draw is clamped to 12 h, the lowest is 80 %", () => {
    expect(retryDelaySeconds(schedule, top, () => 0.999_999)).toBe(QUEUES_MAX_DELAY);
    expect(retryDelaySeconds(schedule, top, () => 0.5)).toBe(QUEUES_MAX_DELAY);
    expect(retryDelaySeconds(schedule, top, () => 0)).toBe(34_560);
  });

  it("every entry of the schedule stays within 12 h over many random draws", () => {
    for (let index = 0; index < schedule.length; index++) {
      for (let draw = 0; draw < 2_000; draw++) {
        const delay = retryDelaySeconds(schedule, index)!;
        expect(delay).toBeLessThanOrEqual(QUEUES_MAX_DELAY);
        expect(delay).toBeGreaterThanOrEqual(Math.round(schedule[index]! * 0.8));
      }
    }
  });

  it("shorter entries keep their full ±20 % jitter", () => {
    expect(retryDelaySeconds(schedule, 0, () => 0.999_999)).toBe(12);
    expect(retryDelaySeconds(schedule, 0, () => 0)).toBe(8);
    expect(retryDelaySeconds([21_600], 0, () => 0.999_999)).toBe(25_920);
  });

  it("past the end of the schedule there is no retry", () => {
    expect(retryDelaySeconds(schedule, schedule.length)).toBeNull();
  });
});
