import { type AuditRow, auditInserts, chainHash } from "../../src/ledger/chain";

/** The last row of a database's audit chain, null while it has none. */
export const lastAuditRow = (db: D1Database) =>
  db.prepare("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").first<{ seq: number; hash: string }>();

/**
 * Appends `n` payment rows to `db`'s audit chain (from `genesis` when it has none), chained as the
 * ledger chains them, a few hundred inserts to a batch: a long history in a second or two. For a
 * test file that moves no money on that database (the ledger's sequencer would not know of them).
 */
export async function appendAuditRows(
  db: D1Database,
  genesis: string,
  n: number,
): Promise<{ seq: number; hash: string }> {
  let prev = (await lastAuditRow(db)) ?? { seq: 0, hash: genesis };
  const rows: AuditRow[] = [];
  for (let i = 0; i < n; i++) {
    const seq = prev.seq + 1;
    const draft = {
      type: "charge.paid",
      reference: `x402:0x${seq.toString(16).padStart(64, "0")}`,
      chargeId: `chg_seeded${seq}`,
      agentId: `agent_seeded${seq % 97}`,
      merchantId: "mch_seeded",
      amountMinor: 100 + (seq % 1_000),
      currency: "usd",
      data: { method: "x402", payer: `0x${"ab".repeat(20)}`, network: "eip155:31337", amountBaseUnits: `${seq}0000` },
      createdAt: new Date(Date.UTC(2026, 10, 1) + seq * 1_000).toISOString(),
    };
    const hash = chainHash(prev.hash, seq, draft);
    rows.push({ ...draft, seq, prevHash: prev.hash, hash });
    prev = { seq, hash };
  }
  const inserts = auditInserts(rows).map((s) => db.prepare(s.sql).bind(...s.params));
  for (let i = 0; i < inserts.length; i += 200) await db.batch(inserts.slice(i, i + 200));
  return prev;
}
