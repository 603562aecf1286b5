import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { appendRows, MAX_PARAMS, mergeAppends, sqlStatement } from "../../src/db/statements";

/*
 * Appendable inserts (ledger entries, outbox events, audit rows): the ledger
 * sequencer writes a group's rows of one insert in as few statements as D1's
 * parameter limit allows, in the order the plans gave them.
 */
const scope = `appends_${crypto.randomUUID()}`;
const INTO = "INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at)";
const row = (n: number) => [scope, `k${n}`, `h${n}`, "pending", "t", "t"];
const OTHER = "INSERT INTO ledger_entries (transfer_id, account, amount_minor, amount_base_units, created_at)";

describe("appendable inserts", () => {
  it("carry the insert they belong to and run as they are", async () => {
    const statement = appendRows(INTO, 6, [row(1), row(2)]);
    expect(statement.sql).toBe(`${INTO} VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)`);
    expect(statement.append).toEqual({ into: INTO, width: 6 });
    expect(() => appendRows(INTO, 6, [])).toThrow();
    expect(() => appendRows(INTO, 6, [row(1).slice(1)])).toThrow();
  });

  it("merge rows of one insert in order, keep other inserts apart, and split at the parameter limit", async () => {
    const perInsert = Math.floor(MAX_PARAMS / 6);
    const statements = Array.from({ length: perInsert + 3 }, (_, n) => appendRows(INTO, 6, [row(n)]));
    statements.splice(
      2,
      0,
      appendRows(OTHER, 5, [
        [`t_${scope}`, "external:a", -5, -50_000, "t"],
        [`t_${scope}`, "external:m", 5, 50_000, "t"],
      ]),
    );
    const merged = mergeAppends(statements);
    expect(merged.map((s) => s.params.length)).toEqual([perInsert * 6, 3 * 6, 10]);
    expect(merged.every((s) => s.params.length <= MAX_PARAMS)).toBe(true);
    expect(merged[0]!.params.filter((_, i) => i % 6 === 1)).toEqual(
      Array.from({ length: perInsert }, (_, n) => `k${n}`),
    );
    expect(merged[1]!.params.filter((_, i) => i % 6 === 1)).toEqual(
      [perInsert, perInsert + 1, perInsert + 2].map((n) => `k${n}`),
    );
    // The merged statements write exactly the rows the separate ones would.
    await env.DB.batch(merged.map((s) => env.DB.prepare(s.sql).bind(...s.params)));
    const keys = await env.DB.prepare("SELECT key FROM idempotency_keys WHERE scope = ? ORDER BY rowid")
      .bind(scope)
      .all<{ key: string }>();
    expect(keys.results.map((r) => r.key)).toEqual(Array.from({ length: perInsert + 3 }, (_, n) => `k${n}`));
    const entries = await env.DB.prepare(
      "SELECT SUM(amount_minor) AS total, COUNT(*) AS n FROM ledger_entries WHERE transfer_id = ?",
    )
      .bind(`t_${scope}`)
      .first();
    expect(entries).toEqual({ total: 0, n: 2 });
  });

  it("take appendable inserts only", () => {
    expect(() => mergeAppends([sqlStatement("DELETE FROM idempotency_keys WHERE scope = ?", scope)])).toThrow(
      /appendable/,
    );
  });
});
