import type { Hex } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import type { EvidenceFile, EvidenceTrust } from "../../src/receipts/evidence-verify";
import { verifyEvidence } from "../../src/receipts/evidence-verify";
import { api, consoleToken } from "../helpers/api";
import { anchoredEnv, anchorsOn, callWith, consoleCall, deployAnchor } from "../helpers/checkpoints";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";
import { chain } from "../helpers/x402";

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

/** The failed checks as [check, detail], with the service's keys and the chain `trust` names. */
const failures = async (file: unknown, trust: Omit<EvidenceTrust, "keys">) => {
  const verdict = await verifyEvidence(file, { keys: await keys(), ...trust });
  return verdict.checks.filter((c) => c.outcome === "failed").map((c) => [c.check, c.detail]);
};

/** A detail that names each of `fields` (each a field name or a whole message). */
const fieldsIn = (fields: string[]) =>
  expect.stringMatching(new RegExp(fields.map((f) => `(?=[^]*${literal(f)})`).join("")));
const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A failed check whose detail names each of `fields`. */
const named = (check: string, ...fields: string[]) => [check, fieldsIn(fields)];

/** An address that is none of the service's. */
const STRANGER = "0x000000000000000000000000000000000000dead";

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
      ["keys", "ok"],
      ["covered", "ok"],
      ["on_chain", "ok"],
    ]);
    expect(verdict.ok).toBe(true);
  });

  it("fails on every tampered part, naming the field", async () => {
    const anchors = await anchorsOn(contract, file.checkpoint.seq);
    const cp = file.checkpoint;
    const trust = { anchors, chainId: chain().chainId, contract };
    const cases: [string, (f: EvidenceFile) => void, unknown[][]][] = [
      [
        "auditRow.amountMinor",
        (f) => {
          f.auditRow.amountMinor! += 1;
        },
        [
          named("receipt", "auditRow.amountMinor: the file says 1235, the receipt says 1234"),
          named("audit_row", "auditRow: its content hashes to"),
        ],
      ],
      [
        "auditRow.prevHash",
        (f) => {
          f.auditRow.prevHash = "2".repeat(64);
        },
        [named("audit_row", "auditRow: its content hashes to")],
      ],
      [
        "auditRow.hash",
        (f) => {
          f.auditRow.hash = "3".repeat(64);
        },
        [
          named("receipt", `auditRow.hash: the file says ${"3".repeat(64)}, the receipt says ${file.auditRow.hash}`),
          named("audit_row", `not to auditRow.hash ${"3".repeat(64)}`),
          named("covered", "merklePath: "),
        ],
      ],
      [
        "auditRow.seq",
        (f) => {
          f.auditRow.seq = cp.seq + 1;
        },
        [
          named("receipt", `auditRow.seq: the file says ${cp.seq + 1}, the receipt says ${file.auditRow.seq}`),
          named("audit_row", "auditRow: its content hashes to"),
          named("covered", `auditRow.seq: ${cp.seq + 1} is not among the checkpoint's rows ${cp.fromSeq}..${cp.seq}`),
        ],
      ],
      [
        "chargeId",
        (f) => {
          f.chargeId = otherChargeId;
        },
        [
          named("receipt", `chargeId: the file says ${otherChargeId}, the receipt says ${chargeId}`),
          named("audit_row", `auditRow.chargeId: the file says ${chargeId}, the file's chargeId is ${otherChargeId}`),
        ],
      ],
      [
        "merklePath hash",
        (f) => {
          f.merklePath[0]!.hash = "0".repeat(64);
        },
        [named("covered", "merklePath: it does not lead from auditRow.hash")],
      ],
      [
        "merklePath side",
        (f) => {
          f.merklePath[0]!.side = f.merklePath[0]!.side === "left" ? "right" : "left";
        },
        [named("covered", "merklePath: ")],
      ],
      [
        "merklePath length",
        (f) => {
          f.merklePath.push({ side: "left", hash: "4".repeat(64) });
        },
        [named("covered", "merklePath: ")],
      ],
      ...(["seq", "fromSeq"] as const).map(
        (field) =>
          [
            `checkpoint.${field}`,
            (f: EvidenceFile) => {
              f.checkpoint[field] += 1;
            },
            [
              named(
                "checkpoint",
                `checkpoint.${field}: the file says ${cp[field] + 1}, the signed checkpoint says ${cp[field]}`,
              ),
            ],
          ] as [string, (f: EvidenceFile) => void, unknown[][]],
      ),
      ...(["hash", "rowsRoot"] as const).map(
        (field) =>
          [
            `checkpoint.${field}`,
            (f: EvidenceFile) => {
              f.checkpoint[field] = "1".repeat(64);
            },
            [
              named(
                "checkpoint",
                `checkpoint.${field}: the file says ${"1".repeat(64)}, the signed checkpoint says ${cp[field]}`,
              ),
            ],
          ] as [string, (f: EvidenceFile) => void, unknown[][]],
      ),
      [
        "checkpoint.signedAt",
        (f) => {
          f.checkpoint.signedAt = "2020-01-01T00:00:00.000Z";
        },
        [
          named(
            "checkpoint",
            `checkpoint.signedAt: the file says 2020-01-01T00:00:00.000Z, the signed checkpoint says ${cp.signedAt}`,
          ),
        ],
      ],
      [
        "shard",
        (f) => {
          f.shard = 1;
        },
        [named("checkpoint", "shard: the file says 1, the signed checkpoint says none (shard 0)")],
      ],
      [
        "checkpoint.jws",
        (f) => {
          f.checkpoint.jws = `${f.checkpoint.jws.slice(0, -4)}AAAA`;
        },
        [named("checkpoint", "checkpoint.jws: the signature does not hold")],
      ],
      [
        "checkpoint.transaction",
        (f) => {
          f.checkpoint.transaction = `0x${"ab".repeat(32)}`;
        },
        [
          named(
            "on_chain",
            `checkpoint.transaction: the file says 0x${"ab".repeat(32)}, the first anchor on chain is ${cp.transaction}`,
          ),
        ],
      ],
      [
        "checkpoint.transaction (none)",
        (f) => {
          f.checkpoint.transaction = null;
        },
        [named("on_chain", "checkpoint.transaction: the file names none")],
      ],
      [
        "checkpoint.blockNumber",
        (f) => {
          f.checkpoint.blockNumber = cp.blockNumber! + 2;
        },
        [
          named(
            "on_chain",
            `checkpoint.blockNumber: the file says ${cp.blockNumber! + 2}, the first anchor on chain is in block ${cp.blockNumber}`,
          ),
        ],
      ],
      [
        "checkpoint.anchoredBy",
        (f) => {
          f.checkpoint.anchoredBy = STRANGER;
        },
        [
          named(
            "on_chain",
            `checkpoint.anchoredBy: the file says ${STRANGER}, the first anchor on chain was sent by ${cp.anchoredBy!.toLowerCase()}`,
          ),
        ],
      ],
      [
        "anchor.chainId",
        (f) => {
          f.anchor!.chainId = 1;
        },
        [named("on_chain", `anchor.chainId: the file says 1, the chain read is ${chain().chainId}`)],
      ],
      [
        "anchor.contract",
        (f) => {
          f.anchor!.contract = STRANGER;
        },
        [named("on_chain", `anchor.contract: the file says ${STRANGER}, the trusted anchor contract is ${contract}`)],
      ],
      [
        "keys (another key under the signer's kid)",
        (f) => {
          f.keys.keys[0]!.x = TEST_RECEIPT_KEYS[0].x;
        },
        [named("keys", "keys: the file's key test-only-receipts-1 is not the trusted key of that kid")],
      ],
      [
        // A forged key put first under the signer's kid, the genuine one after it (found by an
        // outside attack: a map by kid kept the last and said the file's keys agree).
        "keys (a second key of the signer's kid, before the genuine one)",
        (f) => {
          const genuine = f.keys.keys.find((k) => k.kid === "test-only-receipts-1")!;
          f.keys.keys = [{ ...genuine, x: TEST_RECEIPT_KEYS[0].x }, ...f.keys.keys];
        },
        [
          named(
            "keys",
            "keys: the file's key test-only-receipts-1 is not the trusted key of that kid",
            "keys: the file holds more than one key of kid test-only-receipts-1",
          ),
        ],
      ],
      [
        "keys (the signer left out)",
        (f) => {
          f.keys.keys = f.keys.keys.filter((k) => k.kid !== "test-only-receipts-1");
        },
        [named("keys", "keys: the file's key set lacks test-only-receipts-1, which signed it")],
      ],
    ];
    for (const [field, change, expected] of cases)
      expect(await failures(tampered(file, change), trust), field).toEqual(expected);

    // Another payment's receipt in this file.
    const otherReceipt = (await api("GET", `/charges/${otherChargeId}/receipt`)).body.receipt as string;
    expect(
      await failures(
        tampered(file, (f) => {
          f.receipt = otherReceipt;
        }),
        trust,
      ),
    ).toEqual([
      named(
        "receipt",
        `chargeId: the file says ${chargeId}, the receipt says ${otherChargeId}`,
        "auditRow.seq",
        "auditRow.hash",
      ),
    ]);
    // Keys that are not the service's: nothing signed verifies, the chain is not looked up, the file's keys disagree.
    const { d: _d, ...stranger } = { ...TEST_RECEIPT_KEYS[0], kid: "test-only-receipts-1" };
    const verdict = await verifyEvidence(file, {
      keys: { keys: [{ ...stranger, x: TEST_RECEIPT_KEYS[0].x }] },
      anchors,
    });
    expect(verdict.ok).toBe(false);
    expect(verdict.checks.map((c) => [c.check, c.outcome])).toEqual([
      ["receipt", "failed"],
      ["audit_row", "ok"],
      ["checkpoint", "failed"],
      ["keys", "failed"],
      ["covered", "ok"],
      ["on_chain", "skipped"],
    ]);
    // Not an evidence file at all: the first field that is not one's.
    const notOne = await verifyEvidence({ hello: "world" }, { keys: await keys(), anchors: null });
    expect(notOne.ok).toBe(false);
    expect(notOne.checks[0]?.detail).toContain("not an evidence file: format");
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
      await failures(
        tampered(file, (f) => {
          f.receipt = refundReceipt;
        }),
        trust,
      ),
    ).toEqual([named("receipt", "receipt: a refund receipt, not a charge's payment receipt")]);
    // Without the chain, the chain is reported unchecked, not passed.
    const offline = await verifyEvidence(file, { keys: await keys(), anchors: null });
    expect(offline.ok).toBe(true);
    expect(offline.checks.at(-1)).toMatchObject({ check: "on_chain", outcome: "skipped" });
  });

  it("looks on chain for the shard and seq the checkpoint signed; the seq's first anchor counts", async () => {
    const cp = file.checkpoint;
    const asked: unknown[] = [];
    // A file that claims shard 1: the chain is read for the signed shard 0, and the claim fails by name.
    const claimed = tampered(file, (f) => {
      f.shard = 1;
    });
    const read = await verifyEvidence(claimed, {
      keys: await keys(),
      anchors: async (at) => {
        asked.push(at);
        return anchorsOn(contract, at.seq);
      },
    });
    expect(asked).toEqual([{ shard: 0, seq: cp.seq }]);
    expect(read.checks.filter((c) => c.outcome === "failed").map((c) => c.check)).toEqual(["checkpoint"]);

    const genuine = (await anchorsOn(contract, cp.seq))[0]!;
    const other = { head: "5".repeat(64), rowsRoot: "6".repeat(64) };
    // Another shard's anchor of the same seq, or a later anchor of it saying otherwise: not this checkpoint's.
    const noise = [
      { ...genuine, ...other, shard: 1, blockNumber: genuine.blockNumber - 1 },
      { ...genuine, ...other, transaction: `0x${"cd".repeat(32)}` as const, blockNumber: genuine.blockNumber + 5 },
    ];
    expect(await failures(file, { anchors: [...noise, genuine] })).toEqual([]);
    // An earlier anchor of the seq with another head: the checkpoint is not the one the chain holds.
    const earlier = {
      ...genuine,
      ...other,
      transaction: `0x${"ef".repeat(32)}` as const,
      blockNumber: genuine.blockNumber - 1,
    };
    expect(await failures(file, { anchors: [genuine, earlier] })).toEqual([
      named(
        "on_chain",
        `checkpoint.hash: signed ${cp.hash}, the first anchor of checkpoint ${cp.seq} on chain (0x${"ef".repeat(32)}) carries ${"5".repeat(64)}`,
        "checkpoint.rowsRoot",
        "checkpoint.transaction",
        "checkpoint.blockNumber",
      ),
    ]);
    // Only another shard's anchor of the seq: none of this checkpoint's.
    expect(await failures(file, { anchors: [noise[0]!] })).toEqual([
      named("on_chain", `no anchor of checkpoint ${cp.seq} from the trusted addresses is on chain`),
    ]);
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
