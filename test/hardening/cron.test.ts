import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/config/env";
import { cronTick } from "../helpers/cron";

// The minute cron runs each job in an invocation of its own; one that fails must not stop the others, nor fail silently.

describe("the minute cron", () => {
  it("logs a job that fails (the deposit watcher with its chain unreachable) and still runs the rest", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const unreachableChain = { ...env, RPC_URL: "http://127.0.0.1:9/" } as Env;
      await env.DB.prepare("INSERT INTO rate_limits (key, window_start, count) VALUES (?, 0, 1)")
        .bind(`cron-${crypto.randomUUID()}`)
        .run();
      await cronTick(unreachableChain);
      const logged = error.mock.calls
        .flat()
        .map(String)
        .filter((line) => line.includes('"where":"cron"'))
        .map((line) => JSON.parse(line) as { job: string; level: string });
      expect(logged).toContainEqual(expect.objectContaining({ level: "error", job: "deposit_watch" }));
      // The sweep ran all the same: the counter from 1970 is gone.
      expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM rate_limits WHERE window_start = 0").first("n")).toBe(0);
    } finally {
      error.mockRestore();
    }
  });
});
