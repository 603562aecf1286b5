import { appendRows, type SqlStatement, sqlStatement } from "../db/statements";
import { baseUnitsParam, centsToUsdcUnits, wholeCentsOf } from "../lib/money";

/**
 * Ledger accounts: wallets and merchant balances, the outside world money enters from, and
 * `transit:<k>`: in one shard, money sent toward shard k (positive) or received from it (negative)
 * by a payment whose two sides live in different shards. Like `external:*`, a transit account
 * belongs to nobody and has no balance row.
 */
export type Account = `agent:${string}` | `merchant:${string}` | `external:${string}` | `transit:${number}`;

/** One movement of `amountBaseUnits` (the token's base units, 1 cent = 10,000) from one account to another. */
export interface Posting {
  from: Account;
  to: Account;
  amountBaseUnits: bigint;
}

/** A posting of a whole number of cents. */
export const centsPosting = (from: Account, to: Account, amountMinor: number): Posting => ({
  from,
  to,
  amountBaseUnits: centsToUsdcUnits(amountMinor),
});

/** The signed entries of a set of postings: each posting is a -amount and a +amount row, so they sum to zero. */
export function entriesOf(postings: Posting[]): { account: Account; amountBaseUnits: bigint }[] {
  return postings.flatMap((p) => {
    if (typeof p.amountBaseUnits !== "bigint" || p.amountBaseUnits <= 0n)
      throw new Error(`posting amount must be a positive integer: ${p.amountBaseUnits}`);
    if (p.from === p.to) throw new Error("posting from and to must differ");
    return [
      { account: p.from, amountBaseUnits: -p.amountBaseUnits },
      { account: p.to, amountBaseUnits: p.amountBaseUnits },
    ];
  });
}

/**
 * The statements that record postings: the entries themselves (an appendable
 * insert: nothing in a batch reads them) and the cached balance of every agent
 * and merchant account they touch, each update answering with the balance after
 * it (`balanceAfter`). Base units are what moves; the cents columns beside them
 * are their whole cents (the tables' triggers refuse any other value). The balance
 * columns carry CHECK (>= 0), so an overdraft aborts the batch.
 */
export function postingStatements(transferId: string, postings: Posting[], createdAt: string): SqlStatement[] {
  const entries = entriesOf(postings);
  const statements = [
    appendRows(
      "INSERT INTO ledger_entries (transfer_id, account, amount_minor, amount_base_units, created_at)",
      5,
      entries.map((e) => [
        transferId,
        e.account,
        wholeCentsOf(e.amountBaseUnits),
        baseUnitsParam(e.amountBaseUnits),
        createdAt,
      ]),
    ),
  ];
  for (const entry of entries) {
    const [kind, id] = splitAccount(entry.account);
    const table = kind === "agent" ? "agents" : kind === "merchant" ? "merchants" : null;
    const amount = baseUnitsParam(entry.amountBaseUnits);
    // D1 binds a JS number as REAL: cast, or the division is a fraction for an amount below a cent
    // and the cents trigger refuses it.
    if (table)
      statements.push(
        sqlStatement(
          `UPDATE ${table} SET balance_base_units = balance_base_units + CAST(? AS INTEGER),
             balance_minor = (balance_base_units + CAST(? AS INTEGER)) / 10000
           WHERE id = ? ${RETURNING_BALANCE}`,
          amount,
          amount,
          id,
          entry.account,
        ),
      );
  }
  return statements;
}

/** Each balance update answers with its account and the balance after it, read back with `balanceAfter`. */
const RETURNING_BALANCE =
  "RETURNING ? AS account, balance_minor AS balanceMinor, CAST(balance_base_units AS TEXT) AS balanceBaseUnits";

/** The balance of `account` after a committed plan, from its postings' own answers (undefined if it posted none to it). */
export function balanceAfter(results: Record<string, unknown>[][], account: Account): number | undefined {
  const row = results.flat().find((r) => r.account === account);
  return row === undefined ? undefined : Number(row.balanceMinor);
}

/** The exact balance of `account` after a committed plan, in base units (undefined if it posted none to it). */
export function baseUnitsAfter(results: Record<string, unknown>[][], account: Account): bigint | undefined {
  const row = results.flat().find((r) => r.account === account);
  return row === undefined ? undefined : BigInt(String(row.balanceBaseUnits));
}

function splitAccount(account: Account): [string, string] {
  const at = account.indexOf(":");
  return [account.slice(0, at), account.slice(at + 1)];
}
