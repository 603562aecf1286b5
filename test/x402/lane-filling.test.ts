import { describe, expect, it } from "vitest";
import { fillLane } from "../../src/x402/facilitator";

/*
 * With batched settlement an isolate fills the gas keys' lanes in order (src/x402/facilitator.ts),
 * so settlements gather into few, full batches; these are its choices, given what it knows.
 */
const [A, B, C] = ["0xa", "0xb", "0xc"] as `0x${string}`[];
const lanes = [A!, B!, C!];
const NOW = 1_000_000;
const state = (inBatches: Record<string, number>, resting: Record<string, number> = {}) => ({
  inBatches: new Map(Object.entries(inBatches)),
  resting: new Map(Object.entries(resting)),
});

describe("filling settlement lanes with batching", () => {
  it("the first lane takes settlements until it holds a batch's worth, then the next takes the overflow", () => {
    expect(fillLane(lanes, NOW, 3, state({}))).toBe(A);
    expect(fillLane(lanes, NOW, 3, state({ [A!]: 2 }))).toBe(A);
    expect(fillLane(lanes, NOW, 3, state({ [A!]: 3 }))).toBe(B);
    expect(fillLane(lanes, NOW, 3, state({ [A!]: 3, [B!]: 3 }))).toBe(C);
  });

  it("every lane full: the least loaded", () => {
    expect(fillLane(lanes, NOW, 2, state({ [A!]: 5, [B!]: 2, [C!]: 4 }))).toBe(B);
  });

  it("a resting lane (its last send failed) is passed over while it rests, and taken again after", () => {
    expect(fillLane(lanes, NOW, 3, state({}, { [A!]: NOW + 1 }))).toBe(B);
    expect(fillLane(lanes, NOW, 3, state({}, { [A!]: NOW }))).toBe(A);
  });

  it("every lane resting: they are still used, filled in order", () => {
    const allResting = { [A!]: NOW + 10, [B!]: NOW + 10, [C!]: NOW + 10 };
    expect(fillLane(lanes, NOW, 3, state({}, allResting))).toBe(A);
    expect(fillLane(lanes, NOW, 3, state({ [A!]: 3 }, allResting))).toBe(B);
  });
});
