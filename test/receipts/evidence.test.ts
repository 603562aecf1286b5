import type { Hex } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import type { EvidenceFile } from "../../src/receipts/evidence-verify";
import { verifyEvidence } from "../../src/receipts/evidence-verify";
import { api, consoleToken } from "../helpers/api";
import { anchoredEnv, anchorsOn, callWith, consoleCall, deployAnchor } from "../helpers/checkpoints";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";

/*
 * A paid charge's evidence file against the real local chain: ready once an anchored checkpoint
 * covers the payment, it verifies offline (receipt, audit row, checkpoint, Merkle path, anchor
 * read from the chain), shows no other merchant's row, and every tampered part fails.
 */

let contract: Hex;
let anchored: ReturnType<typeof anchoredEnv>;
beforeAll(async () => {
  contract = await deployAnchor();
  anchored = anchoredEnv(contract);
});

const keys = async () => (await api("GET", "/.well-known/jwks.json")).body;
const evidencePath = (chargeId: string) => `/merchant/charges/${chargeId}/evidence`;

async function paidChargeOf(merchantKey: string, agentKey: string, cents: number) {
  const charge = await createCharge(merchantKey, cents);
  expect((await payCharge(agentKey, charge.chargeId)).status).toBe(200);
  return charge.chargeId;
}

/** A deep copy with one change, for the tampering cases. */
const tampered = (file: EvidenceFile, change: (f: EvidenceFile) => void): EvidenceFile => {
  const copy = structuredClone(file);
  change(copy);
  return copy;
};

const failedChecks = async (file: unknown, anchors: Awaited<ReturnType<typeof anchorsOn>> | null) => {
  const verdict = await verifyEvidence(file, { keys: await keys(), anchors });
  return verdict.checks.filter((c) => c.outcome === "failed").map((c) => c.check);
};

describe("a charge's evidence file", () => {
  let merchant: { merchantId: string; apiKey: string };
  let other: { merchantId: string; apiKey: string };
  let chargeId: string;
  let otherChargeId: string;
  let file: EvidenceFile;

  it("is not ready (409, Retry-After) before a checkpoint covers the payment", async () => {
    merchant = await createMerchant({ name: "Evidence Co" });
    other = await createMerchant({ name: "Someone Else" });
    const agent = await createAgent({ credit: 5_000 });
    chargeId = await paidChargeOf(merchant.apiKey, agent.apiKey, 1_234);
    // Another merchant's payment in the same checkpoint: the file must not show it.
    otherChargeId = await paidChargeOf(other.apiKey, agent.apiKey, 777);
    const early = await callWith(anchored, "GET", evidencePath(chargeId), merchant.apiKey);
    expect(early.status).toBe(409);
    expect(early.body).toEqual({ error: "evidence_not_ready" });
    expect(early.headers.get("retry-after")).toBe("60");
  });

  it("once an anchored checkpoint covers it, holds everything a third party checks offline, and verifies", async () => {
    const made = await consoleCall(anchored, "POST", "/console/audit/checkpoints");
    expect(made.status).toBe(201);
    expect(made.body.checkpoint.anchorStatus).toBe("confirmed");
    const res = await callWith(anchored, "GET", evidencePath(chargeId), merchant.apiKey);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="evidence-${chargeId}.json"`);
    file = res.body as EvidenceFile;
    expect(file).toMatchObject({
      format: "agent-pay-evidence/1",
      chargeId,
      auditRow: { type: "charge.paid", chargeId, merchantId: merchant.merchantId, amountMinor: 1_234 },
      checkpoint: {
        seq: made.body.checkpoint.seq,
        hash: made.body.checkpoint.hash,
        rowsRoot: made.body.checkpoint.rowsRoot,
        transaction: made.body.checkpoint.transaction,
      },
      anchor: { contract },
    });
    expect(file.merklePath.length).toBeGreaterThan(0);
    // The receipt is the one the public route serves.
    expect(file.receipt).toBe((await api("GET", `/charges/${chargeId}/receipt`)).body.receipt);
    // The audit row is the one the console reads.
    const row = (
      await api("GET", `/console/audit?afterSeq=${file.auditRow.seq - 1}&limit=1`, {
        token: await consoleToken(),
      })
    ).body.events[0];
    expect(file.auditRow).toEqual(row);
    // Sibling hashes only: no other merchant's row, charge or id is in the file.
    const text = JSON.stringify(file);
    expect(text).not.toContain(otherChargeId);
    expect(text).not.toContain(other.merchantId);

    const anchors = await anchorsOn(contract, file.checkpoint.seq);
    const verdict = await verifyEvidence(file, { keys: await keys(), anchors });
    expect(verdict.checks.map((c) => [c.check, c.outcome])).toEqual([
      ["receipt", "ok"],
      ["audit_row", "ok"],
      ["checkpoint", "ok"],
      ["covered", "ok"],
      ["on_chain", "ok"],
    ]);
    expect(verdict.ok).toBe(true);
  });

  it("fails on every tampered part, naming it", async () => {
    const anchors = await anchorsOn(contract, file.checkpoint.seq);
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.auditRow.amountMinor += 1;
        }),
        anchors,
      ),
    ).toEqual(["receipt", "audit_row"]);
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.merklePath[0]!.hash = "0".repeat(64);
        }),
        anchors,
      ),
    ).toEqual(["covered"]);
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.checkpoint.rowsRoot = "1".repeat(64);
        }),
        anchors,
      ),
    ).toEqual(["checkpoint", "covered", "on_chain"]);
    // Another payment's receipt in this file.
    const otherReceipt = (await api("GET", `/charges/${otherChargeId}/receipt`)).body.receipt as string;
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.receipt = otherReceipt;
        }),
        anchors,
      ),
    ).toEqual(["receipt"]);
    // A transaction that anchors nothing of this checkpoint.
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.checkpoint.transaction = `0x${"ab".repeat(32)}`;
        }),
        anchors,
      ),
    ).toEqual(["on_chain"]);
    // Keys that are not the service's: nothing signed verifies.
    const { d: _d, ...stranger } = { ...TEST_RECEIPT_KEYS[0], kid: "test-only-receipts-1" };
    const verdict = await verifyEvidence(file, {
      keys: { keys: [{ ...stranger, x: TEST_RECEIPT_KEYS[0].x }] },
      anchors,
    });
    expect(verdict.checks.filter((c) => c.outcome === "failed").map((c) => c.check)).toEqual(["receipt", "checkpoint"]);
    // Not an evidence file at all.
    expect((await verifyEvidence({ hello: "world" }, { keys: await keys(), anchors: null })).ok).toBe(false);
    // An unsigned field the file would echo: the checkpoint's time.
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.checkpoint.signedAt = "2020-01-01T00:00:00.000Z";
        }),
        anchors,
      ),
    ).toEqual(["checkpoint"]);
    // The chain read is not the one the file names.
    const elsewhere = await verifyEvidence(file, { keys: await keys(), anchors, chainId: 1 });
    expect(elsewhere.checks.filter((c) => c.outcome === "failed").map((c) => c.check)).toEqual(["on_chain"]);
    // A refund's receipt is no evidence of the payment, even of this charge.
    const refunded = await api("POST", `/merchant/charges/${chargeId}/refunds`, {
      token: merchant.apiKey,
      body: { amountUsdCents: 1 },
    });
    expect(refunded.status).toBe(201);
    const refundReceipt = (
      await api("GET", `/merchant/refunds/${refunded.body.refund.refundId}/receipt`, { token: merchant.apiKey })
    ).body.receipt as string;
    expect(
      await failedChecks(
        tampered(file, (f) => {
          f.receipt = refundReceipt;
        }),
        anchors,
      ),
    ).toEqual(["receipt"]);
    // Without the chain, the chain is reported unchecked, not passed.
    const offline = await verifyEvidence(file, { keys: await keys(), anchors: null });
    expect(offline.ok).toBe(true);
    expect(offline.checks.at(-1)).toMatchObject({ check: "on_chain", outcome: "skipped" });
  });

  it("is 404 for another merchant's charge, an unpaid or unknown one; 401 without a key, 403 with another kind", async () => {
    expect((await callWith(anchored, "GET", evidencePath(chargeId), other.apiKey)).body).toEqual({
      error: "charge_not_found",
    });
    const unpaid = await createCharge(merchant.apiKey, 50);
    for (const id of [unpaid.chargeId, "ch_doesnotexist"]) {
      const res = await api("GET", evidencePath(id), { token: merchant.apiKey });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: "charge_not_found" });
    }
    expect((await api("GET", evidencePath(chargeId))).status).toBe(401);
    expect((await api("GET", evidencePath(chargeId), { token: await consoleToken() })).status).toBe(403);
  });

  it("where checkpoints are not anchored, is ready once a signed checkpoint covers it, and says it has no transaction", async () => {
    const agent = await createAgent({ credit: 1_000 });
    const later = await paidChargeOf(merchant.apiKey, agent.apiKey, 321);
    // The default test Worker anchors nowhere: its checkpoint is signed and stays pending.
    expect((await api("GET", evidencePath(later), { token: merchant.apiKey })).status).toBe(409);
    const made = await api("POST", "/console/audit/checkpoints", { token: await consoleToken() });
    expect(made.status).toBe(201);
    expect(made.body.checkpoint.anchorStatus).toBe("pending");
    const res = await api("GET", evidencePath(later), { token: merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.checkpoint.transaction).toBeNull();
    expect(res.body.anchor).toBeNull();
    expect(await failedChecks(res.body, [])).toEqual(["on_chain"]);
    expect((await verifyEvidence(res.body, { keys: await keys(), anchors: null })).ok).toBe(true);
  });
});
