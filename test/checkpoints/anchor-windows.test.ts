import { env } from "cloudflare:workers";
import { toHex } from "viem";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type Checkpoint, checkpointAt } from "../../src/audit/checkpoint-rows";
import { ANCHOR_RESEND_AFTER_MS, anchorCheckpoint } from "../../src/checkpoints/anchoring";
import { makeCheckpoint } from "../../src/checkpoints/checkpoints";
import { setFaultHook } from "../../src/lib/faults";
import { anchorsOn, deployAnchor } from "../helpers/checkpoints";
import { createAgent } from "../helpers/factories";
import { envThrough, logSearches, relayTag } from "../helpers/relay";
import { publicClient, refuseAtRelay } from "../helpers/x402";

/*
 * An anchor whose outcome was lost (a crash after the send) is looked for on chain from the head
 * recorded at its first hand-over (sent_block), in windows within RPC_MAX_LOG_RANGE (10 here, for a
 * history longer than the cap in a few mined blocks), through the relay under a tag of the test's own.
 * This file deploys its own anchor contract.
 */
let contract: `0x${string}`;
beforeAll(async () => {
  contract = await deployAnchor();
});
afterEach(() => {
  setFaultHook(null);
  vi.restoreAllMocks();
});

/** A checkpoint whose anchor was sent and whose worker died before recording it. */
async function lostAnchor(): Promise<Checkpoint> {
  await createAgent({ credit: 300 });
  const made = await makeCheckpoint(env);
  if (made.kind !== "created") throw new Error(`no checkpoint made: ${made.kind}`);
  setFaultHook((at) => {
    if (at === "checkpoint.after_send") throw new Error("crash after the send");
  });
  await expect(anchorCheckpoint({ ...env, AUDIT_ANCHOR_ADDRESS: contract }, made.checkpoint)).rejects.toThrow(
    "crash after the send",
  );
  setFaultHook(null);
  return (await checkpointAt(env.DB, made.checkpoint.seq))!;
}

const later = () => Date.now() + ANCHOR_RESEND_AFTER_MS + 1000;

describe("an anchor searched from its recorded block", () => {
  it("records the head at the hand-over and finds the anchor from there, in windows no wider than the cap", async () => {
    const marked = await lostAnchor();
    const [anchor] = await anchorsOn(contract, marked.seq);
    expect(marked.sentBlock).not.toBeNull();
    expect(marked.sentBlock!).toBeLessThanOrEqual(anchor!.blockNumber);
    await publicClient().request({ method: "anvil_mine" as never, params: [toHex(25)] as never });

    const tag = relayTag();
    const through = envThrough(tag, { AUDIT_ANCHOR_ADDRESS: contract, RPC_MAX_LOG_RANGE: "10" });
    expect(await anchorCheckpoint(through, marked, later())).toEqual({
      kind: "confirmed",
      transaction: anchor!.transaction,
      blockNumber: anchor!.blockNumber,
    });
    const windows = await logSearches(tag);
    expect(windows[0]!.from).toBe(Math.max(0, marked.sentBlock! - 100));
    for (const w of windows) expect(w.to - w.from + 1).toBeLessThanOrEqual(10);
    expect(windows.at(-1)!.to).toBeGreaterThanOrEqual(anchor!.blockNumber);
    expect(windows.filter((w) => w.from > anchor!.blockNumber)).toEqual([]);
  });

  it("a refused search is logged as an error and waits (chain_unavailable); the next step confirms it, once", async () => {
    const marked = await lostAnchor();
    const tag = relayTag();
    const through = envThrough(tag, { AUDIT_ANCHOR_ADDRESS: contract });
    await refuseAtRelay({
      containing: `/t/${tag}`,
      method: "eth_getLogs",
      times: 1,
      message: "query returned more than 10000 results",
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    expect(await anchorCheckpoint(through, marked, later())).toEqual({ kind: "waiting", reason: "chain_unavailable" });
    expect(
      errors.mock.calls
        .map((c) => JSON.parse(String(c[0])) as Record<string, unknown>)
        .filter((l) => l.where === "rpc_refused" && l.method === "eth_getLogs"),
    ).toHaveLength(1);
    expect((await anchorCheckpoint(through, marked, later())).kind).toBe("confirmed");
    expect(await anchorsOn(contract, marked.seq)).toHaveLength(1);
  });
});
