import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { merchantBalance } from "../helpers/factories";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { tokenBalance } from "../helpers/x402";
import {
  fundedMerchant,
  merchantLedger,
  outboxEventsOf,
  payoutEntries,
  settled,
  transfersTo,
  treasury,
} from "./fixtures";

/** RFC 4180 records: quoted fields with doubled quotes, CRLF between records. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted && ch === '"' && text[i + 1] === '"') {
      field += '"';
      i++;
    } else if (ch === '"') {
      quoted = !quoted;
    } else if (!quoted && ch === ",") {
      record.push(field);
      field = "";
    } else if (!quoted && ch === "\r" && text[i + 1] === "\n") {
      records.push([...record, field]);
      record = [];
      field = "";
      i++;
    } else {
      field += ch;
    }
  }
  if (field !== "" || record.length > 0) records.push([...record, field]);
  return records;
}

describe("a settlement address holding too little", () => {
  it("fails the payout treasury_insufficient_funds, restores the balance, reports payout.failed, audits both", async () => {
    // More than the settlement address holds now, by a margin no other test file's deposits can close meanwhile.
    const held = await tokenBalance(treasury().payTo);
    const cents = Number(held / 10_000n) + 100_000_000;
    const m = await fundedMerchant(cents);
    const hook = `payout-failed-${crypto.randomUUID()}`;
    await registerEndpoint(hook, { merchantId: m.merchantId });

    const res = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: cents } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ balanceMinor: 0, payout: { status: "pending", amountMinor: cents } });
    const id = res.body.payout.payoutId as string;
    const failed = await settled(m.apiKey, id);
    expect(failed).toMatchObject({
      status: "failed",
      transaction: null,
      failureReason: "treasury_insufficient_funds",
      paidAt: null,
    });
    expect(await merchantBalance(m.apiKey)).toBe(cents);
    expect(await merchantLedger(m.merchantId)).toEqual({ cached: cents, entries: cents });
    expect(await transfersTo(m.address)).toEqual([]);
    expect((await payoutEntries(id)).map((e) => [e.transferId, e.amountMinor])).toEqual([
      [id, -cents],
      [id, cents],
      [`${id}:reversal`, -cents],
      [`${id}:reversal`, cents],
    ]);
    expect(await outboxEventsOf("payout.failed", id)).toBe(1);
    expect(await outboxEventsOf("payout.paid", id)).toBe(0);

    const deliveries = await waitForReceived(hook, (list) =>
      list.some((d) => JSON.parse(d.body).type === "payout.failed"),
    );
    const events = deliveries.map((d) => JSON.parse(d.body)).filter((e) => e.type === "payout.failed");
    expect(events).toHaveLength(1);
    expect(events[0].data).toEqual({
      payoutId: id,
      merchantId: m.merchantId,
      amountMinor: cents,
      currency: "USD",
      destination: m.address.toLowerCase(),
      transaction: null,
      failureReason: "treasury_insufficient_funds",
    });

    // The audit chain holds the debit and its reversal, and still verifies.
    const token = await consoleToken();
    const audit = await api("GET", "/console/audit?limit=1000", { token });
    expect(audit.status).toBe(200);
    const mine = audit.body.events.filter((e: { reference: string | null }) => e.reference === id);
    expect(mine.map((e: { type: string }) => e.type)).toEqual(["payout.created", "payout.failed"]);
    for (const e of mine) expect(e).toMatchObject({ merchantId: m.merchantId, amountMinor: cents, currency: "USD" });
    expect(mine[1].data).toMatchObject({ payoutId: id, failureReason: "treasury_insufficient_funds" });
    expect((await api("GET", "/console/audit/verify", { token })).body.ok).toBe(true);

    // The export's rows name the payout.
    const csv = parseCsv((await api("GET", "/export/transactions.csv", { token })).text);
    const [header, ...rows] = csv;
    const col = (name: string) => header!.indexOf(name);
    const payoutRows = rows.filter((r) => r[col("reference")] === id);
    expect(payoutRows.map((r) => r[col("type")])).toEqual(["payout.created", "payout.failed"]);
    for (const r of payoutRows) {
      expect(JSON.parse(r[col("data")]!).payoutId).toBe(id);
      expect(Number(r[col("amountMinor")])).toBe(cents);
      expect(r[col("merchantId")]).toBe(m.merchantId);
    }
  });
});
