import { appendRows, type SqlStatement, sqlStatement } from "../db/statements";

/**
 * Ledger accounts: wallets and merchant balances, the outside world money enters from, and
 * `transit:<k>`: in one shard, money sent toward shard k (positive) or received from it (negative)
 * by a payment whose two sides live in different shards. Like `external:*`, a transit account
 * belongs to nobody and has no balance row.
 */
export type Account = `agent:${string}` | `merchant:${string}` | `external:${string}` | `transit:${number}`;

/** One movement of `amountMinor` cents from one account to another. */
export interface Posting {
  from: Account;
  to: Account;
  amountMinor: number;
}

/** The signed entries of a set of postings: each posting is a -amount and a +amount row, so they sum to zero. */
export function entriesOf(postings: Posting[]): { account: Account; amountMinor: number }[] {
  return postings.flatMap((p) => {
    if (!Number.isSafeInteger(p.amountMinor) || p.amountMinor <= 0)
      throw new Error(`posting amount must be a positive integer: ${p.amountMinor}`);
    if (p.from === p.to) throw new Error("posting from and to must differ");
    return [
      { account: p.from, amountMinor: -p.amountMinor },
      { account: p.to, amountMinor: p.amountMinor },
    ];
  });
}

/**
 * The statements that record postings: the entries themselves (an appendable
 * insert: nothing in a batch reads them) and the cached balance of every agent
 * and merchant account they touch, each update answering with the balance after
 * it (`balanceAfter`). The balance columns
 * carry CHECK (>= 0), so an overdraft aborts the batch.
 */
export function postingStatements(transferId: string, postings: Posting[], createdAt: string): SqlStatement[] {
  const entries = entriesOf(postings);
  const statements = [
    appendRows(
      "INSERT INTO ledger_entries (transfer_id, account, amount_minor, created_at)",
      4,
      entries.map((e) => [transferId, e.account, e.amountMinor, createdAt]),
    ),
  ];
  for (const entry of entries) {
    const [kind, id] = splitAccount(entry.account);
    const table = kind === "agent" ? "agents" : kind === "merchant" ? "merchants" : null;
    if (table)
      statements.push(
        sqlStatement(
          `UPDATE ${table} SET balance_minor = balance_minor + ? WHERE id = ? ${RETURNING_BALANCE}`,
          entry.amountMinor,
          id,
          entry.account,
        ),
      );
  }
  return statements;
}

/** Each balance update answers with its account and the balance after it, read back with `balanceAfter`. */
const RETURNING_BALANCE = "RETURNING ? AS account, balance_minor AS balanceMinor";

/** The balance of `account` after a committed plan, from its postings' own answers (undefined if it posted none to it). */
export function balanceAfter(results: Record<string, unknown>[][], account: Account): number | undefined {
  const row = results.flat().find((r) => r.account === account);
  return row === undefined ? undefined : Number(row.balanceMinor);
}

function splitAccount(account: Account): [string, string] {
  const at = account.indexOf(":");
  return [account.slice(0, at), account.slice(at + 1)];
}
