import { describe, expect, it } from "vitest";
import { currentInvocation, Invocation, runInvocation } from "../../src/lib/invocation";

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

describe("an invocation's limits", () => {
  it("has at most rpcInFlight sends in flight, and counts each as a subrequest", async () => {
    const invocation = new Invocation({ d1Queries: 10, subrequests: 100, rpcInFlight: 4 });
    let inFlight = 0;
    let most = 0;
    const sends = Array.from({ length: 25 }, (_, i) =>
      invocation.withSlot(async () => {
        inFlight++;
        most = Math.max(most, inFlight);
        await tick();
        inFlight--;
        return i;
      }),
    );
    expect(await Promise.all(sends)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(most).toBe(4);
    expect(invocation.spent.subrequests).toBe(25);
  });

  it("frees the slot of a send that failed", async () => {
    const invocation = new Invocation({ d1Queries: 10, subrequests: 100, rpcInFlight: 1 });
    await expect(invocation.withSlot(() => Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(await invocation.withSlot(async () => "next")).toBe("next");
  });

  it("says what is left, counting what an item needs", () => {
    const invocation = new Invocation({ d1Queries: 10, subrequests: 5, rpcInFlight: 4 });
    invocation.count("d1Queries", 8);
    expect(invocation.left({ d1Queries: 2 })).toBe(true);
    expect(invocation.left({ d1Queries: 3 })).toBe(false);
    invocation.count("subrequests", 6);
    expect(invocation.left()).toBe(false);
  });

  it("keeps each invocation's counts apart, also across awaits", async () => {
    const a = new Invocation();
    const b = new Invocation();
    await Promise.all([
      runInvocation(a, async () => {
        await tick();
        currentInvocation().count("d1Queries", 3);
      }),
      runInvocation(b, async () => {
        currentInvocation().count("d1Queries", 1);
        await tick();
        currentInvocation().count("d1Queries", 1);
      }),
    ]);
    expect([a.spent.d1Queries, b.spent.d1Queries]).toEqual([3, 2]);
  });
});
