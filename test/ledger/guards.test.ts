import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  type GuardCheck,
  guard,
  guardReasonOf,
  guards,
  type SqlStatement,
  sqlStatement,
} from "../../src/db/statements";

/*
 * Guards in one statement (`guards`) abort a batch exactly as the same guards
 * one after another do: with the reason of the first check that fails, and
 * not at all when every check holds.
 */
const marker = `guards_${crypto.randomUUID()}`;
const run = async (statements: SqlStatement[]) => {
  try {
    await env.DB.batch(statements.map((s) => env.DB.prepare(s.sql).bind(...s.params)));
    return "committed";
  } catch (error) {
    return guardReasonOf(error) ?? `error: ${String(error)}`;
  }
};
// A write after the guards, to see that a refused batch wrote nothing.
const write = (n: number) =>
  sqlStatement(
    "INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at) VALUES (?, ?, 'h', 'pending', 't', 't')",
    marker,
    `k${n}`,
  );
const written = async () =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE scope = ?")
    .bind(marker)
    .first<{ n: number }>())!.n;

describe("guards", () => {
  const holds = (n: number): [string, string, number] => [`check_${n}`, "? = 1", 1];
  const fails = (n: number): [string, string, number] => [`check_${n}`, "? = 1", 0];

  it("refuse with the first failing check's reason, as separate guards would", async () => {
    for (const [checks, expected] of [
      [[fails(1), fails(2), holds(3)], "check_1"],
      [[holds(1), fails(2), fails(3)], "check_2"],
      [[holds(1), holds(2), fails(3)], "check_3"],
    ] as const) {
      const separate = await run([...checks.map((c) => guard(...c)), write(0)]);
      const combined = await run([guards(...checks), write(0)]);
      expect(combined).toBe(expected);
      expect(separate).toBe(expected);
    }
    expect(await written()).toBe(0);
  });

  it("let the batch through when every check holds, with the checks' own parameters in place", async () => {
    const checks: GuardCheck[] = [
      ["amount_in_range", "? BETWEEN ? AND ?", 5, 1, 10],
      ["text_matches", "? = ?", "a", "a"],
      ["row_exists", "EXISTS (SELECT 1 FROM batch_guards WHERE reason = ?) OR ? = 2", "never written", 2],
    ];
    expect(await run([guards(...checks), write(1)])).toBe("committed");
    // Each check's parameters bind to its own condition: moving one check's value breaks only that check.
    expect(
      await run([guards(checks[0]!, checks[1]!, ["row_exists", checks[2]![1], "never written", 3]), write(2)]),
    ).toBe("row_exists");
    expect(
      await run([guards(["amount_in_range", "? BETWEEN ? AND ?", 11, 1, 10], checks[1]!, checks[2]!), write(3)]),
    ).toBe("amount_in_range");
    expect(await run([guards(...checks, ["last_fails", "? = ?", "a", "b"]), write(4)])).toBe("last_fails");
    expect(await written()).toBe(1);
    // A check that is unknown (NULL) does not refuse, alone or beside others, as `guard` does not.
    expect(await run([guard("unknown", "? = 1", null), guards(["unknown", "? = 1", null], checks[0]!), write(5)])).toBe(
      "committed",
    );
    expect(await run([guards(["unknown", "? = 1", null], ["then_false", "1 = 0"]), write(6)])).toBe("then_false");
    expect(await written()).toBe(2);
    // One check is the plain guard.
    expect(guards(["only", "1 = 1"])).toEqual(guard("only", "1 = 1"));
    expect(() => guards(["Not Snake", "1 = 1"], ["ok", "1 = 1"])).toThrow(/snake_case/);
    expect(() => guards()).toThrow(/at least one/);
  });
});
