import type { Hex } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { anchorSeqOf } from "../../src/audit/anchor-abi";
import { type AnchorAt, type EvidenceFile, verifyEvidence } from "../../src/receipts/evidence-verify";
import { api } from "../helpers/api";
import { anchoredEnv, anchorsOn, callWith, consoleCall, deployAnchor } from "../helpers/checkpoints";
import { createCharge, payCharge } from "../helpers/factories";
import { chain } from "../helpers/x402";
import { agentOn, merchantOn } from "./helpers";

/*
 * The evidence file of a charge in ledger shard 1, round trip on the local chain: paid, checkpointed
 * and anchored in shard 1, handed out, then checked by the verifier with the anchors it reads itself.
 * Shard 1's checkpoint signs its shard, and its anchor carries the shard above bit 64 of the seq: the
 * verifier looks for that anchor, not for the plain seq a shard-0 checkpoint would have.
 */

let contract: Hex;
let anchored: ReturnType<typeof anchoredEnv>;
beforeAll(async () => {
  contract = await deployAnchor();
  anchored = anchoredEnv(contract);
});

const keys = async () => (await api("GET", "/.well-known/jwks.json")).body;

describe("the evidence file of a shard-1 charge", () => {
  let file: EvidenceFile;
  const asked: AnchorAt[] = [];
  /** The anchors as the CLI reads them: the anchored seq of the shard and seq the checkpoint signed. */
  const readAnchors = async (at: AnchorAt) => {
    asked.push(at);
    return anchorsOn(contract, anchorSeqOf(at.shard, at.seq));
  };

  it("names shard 1, and verifies against the chain's anchor of shard 1's checkpoint", async () => {
    const merchant = await merchantOn(1, { name: "Shard One Shop" });
    // An agent of the other shard: the payment crosses shards, its charge.paid row is the charge's shard's.
    const agent = await agentOn(0, { credit: 2_000 });
    const charge = await createCharge(merchant.apiKey, 640);
    expect(charge.chargeId).toMatch(/^chg_s1_/);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);

    const made = await consoleCall(anchored, "POST", "/console/audit/checkpoints?shard=1");
    expect(made.status).toBe(201);
    expect(made.body.checkpoint.anchorStatus).toBe("confirmed");
    const res = await callWith(anchored, "GET", `/merchant/charges/${charge.chargeId}/evidence`, merchant.apiKey);
    expect(res.status).toBe(200);
    file = res.body as EvidenceFile;
    expect(file).toMatchObject({
      shard: 1,
      chargeId: charge.chargeId,
      auditRow: { type: "charge.paid", chargeId: charge.chargeId, amountMinor: 640 },
      checkpoint: {
        seq: made.body.checkpoint.seq,
        transaction: made.body.checkpoint.transaction,
        blockNumber: made.body.checkpoint.blockNumber,
        anchoredBy: made.body.checkpoint.anchoredBy,
      },
      anchor: { contract },
    });

    // On chain, the anchor is of shard 1's seq: nothing carries the plain seq.
    const { seq } = file.checkpoint;
    expect(await anchorsOn(contract, seq)).toEqual([]);
    expect(await anchorsOn(contract, anchorSeqOf(1, seq))).toMatchObject([
      { shard: 1, seq, transaction: file.checkpoint.transaction },
    ]);

    const verdict = await verifyEvidence(file, {
      keys: await keys(),
      anchors: readAnchors,
      chainId: chain().chainId,
      contract,
    });
    expect(verdict.checks.map((c) => [c.check, c.outcome])).toEqual([
      ["receipt", "ok"],
      ["audit_row", "ok"],
      ["checkpoint", "ok"],
      ["keys", "ok"],
      ["covered", "ok"],
      ["on_chain", "ok"],
    ]);
    expect(verdict.checks.find((c) => c.check === "on_chain")?.detail).toContain(`anchors shard 1's checkpoint ${seq}`);
    expect(verdict.ok).toBe(true);
    expect(asked).toEqual([{ shard: 1, seq }]);
    // Every anchor of the contract at once (a superset): only shard 1's of this seq counts.
    expect((await verifyEvidence(file, { keys: await keys(), anchors: await anchorsOn(contract) })).ok).toBe(true);
  });

  it("fails when the file's shard or anchor fields are changed, naming the field", async () => {
    const failures = async (change: (f: EvidenceFile) => void) => {
      const copy = structuredClone(file);
      change(copy);
      const verdict = await verifyEvidence(copy, { keys: await keys(), anchors: readAnchors });
      return verdict.checks.filter((c) => c.outcome === "failed").map((c) => [c.check, c.detail]);
    };
    // The shard left out: the signed checkpoint still says 1, and the chain is read for shard 1.
    asked.length = 0;
    expect(
      await failures((f) => {
        delete f.shard;
      }),
    ).toEqual([["checkpoint", "shard: the file says none (shard 0), the signed checkpoint says 1"]]);
    expect(asked).toEqual([{ shard: 1, seq: file.checkpoint.seq }]);
    expect(
      await failures((f) => {
        f.shard = 2;
      }),
    ).toEqual([["checkpoint", "shard: the file says 2, the signed checkpoint says 1"]]);

    const stranger = "0x000000000000000000000000000000000000beef";
    expect(
      await failures((f) => {
        f.checkpoint.anchoredBy = stranger;
      }),
    ).toEqual([
      [
        "on_chain",
        `checkpoint.anchoredBy: the file says ${stranger}, the first anchor on chain was sent by ${file.checkpoint.anchoredBy!.toLowerCase()}`,
      ],
    ]);
    expect(
      await failures((f) => {
        f.checkpoint.blockNumber = file.checkpoint.blockNumber! - 1;
      }),
    ).toEqual([
      [
        "on_chain",
        `checkpoint.blockNumber: the file says ${file.checkpoint.blockNumber! - 1}, the first anchor on chain is in block ${file.checkpoint.blockNumber}`,
      ],
    ]);
  });
});
