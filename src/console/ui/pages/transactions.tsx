import type { AuditVerdict, ShardVerdict } from "../../../audit/verification";
import type { AuditRow } from "../../../ledger/chain";
import { usdOfBaseUnits, When } from "../layout";
import { ChargeLink } from "./charge";

type TransactionsVerdict = AuditVerdict & { shards?: ShardVerdict[] };

/** The page shows this many rows; the CSV has them all. */
export const TRANSACTIONS_SHOWN = 500;

/** A verdict that holds: through the last row, or, while bounded steps carry it on, through the row reached. */
const holds = (verdict: AuditVerdict) =>
  verdict.ok && verdict.progress
    ? `holds so far: verified through seq ${verdict.progress.throughSeq} of ${verdict.progress.lastSeq}, the rest by the next steps`
    : "holds";

/** With shards, the one whose progress the badge shows: the first still in progress. */
const inProgress = (verdict: TransactionsVerdict) => {
  const shard = verdict.shards?.find((v) => v.ok && v.progress)?.shard;
  return shard === undefined ? "" : ` on shard ${shard}`;
};

/** One shard's checking: the rows re-hashed, the checkpoints compared, and the first problems found. */
const ShardScope = ({ verdict, shard }: { verdict: AuditVerdict; shard: number | null }) => {
  const { checkpoints } = verdict;
  const latest = checkpoints.latestSeq === null ? "none signed yet" : `the latest at seq ${checkpoints.latestSeq}`;
  const failed = checkpoints.failed > 0 ? `; the rows contradict ${checkpoints.failed}` : "";
  return (
    <>
      <p>
        {shard === null ? "" : `Shard ${shard}: `}
        {verdict.ok ? holds(verdict) : `broken at seq ${verdict.brokenSeq} (${verdict.problem})`}; re-hashed{" "}
        {verdict.checked} rows after seq {verdict.from}; compared with {checkpoints.checked} signed checkpoints (
        {latest}){failed}.
      </p>
      {checkpoints.problems.length > 0 ? (
        <ul class="checkpoint-problems">
          {checkpoints.problems.map((p) => (
            <li>
              checkpoint seq {p.seq}: {p.kind}: {p.detail}
            </li>
          ))}
        </ul>
      ) : null}
    </>
  );
};

/** What the badge rests on, shard by shard, and what is not checked here. */
const VerificationScope = ({ verdict }: { verdict: TransactionsVerdict }) => (
  <div id="chain-scope" class="muted">
    {verdict.shards ? (
      verdict.shards.map((v) => <ShardScope verdict={v} shard={v.shard} />)
    ) : (
      <ShardScope verdict={verdict} shard={null} />
    )}
    <p>
      The checkpoints' anchors on chain are not checked here. Rows cut short or rewritten together with their
      checkpoints are found only by <code>npm run --silent cli -- audit verify</code>, which reads the anchors from the
      chain with settings of its own.
    </p>
  </div>
);

/** The audit rows of a range of days, the chain's verdict, and the CSV of the same range. */
export const TransactionsPage = (props: {
  range: { fromDay: string; toDay: string };
  rows: AuditRow[];
  verdict: TransactionsVerdict;
}) => {
  const { range, rows, verdict } = props;
  const csvHref = `/console/ui/transactions.csv?from=${range.fromDay}&to=${range.toDay}`;
  return (
    <>
      <form method="get" class="card row">
        <div>
          <label for="from">From</label>
          <input id="from" name="from" type="date" value={range.fromDay} />
        </div>
        <div>
          <label for="to">To</label>
          <input id="to" name="to" type="date" value={range.toDay} />
        </div>
        <div>
          <button type="submit">Show</button>{" "}
          <a id="csv-download" href={csvHref} download>
            Download CSV
          </a>
        </div>
      </form>
      <p>
        Audit chain:{" "}
        {verdict.ok && verdict.progress ? (
          <span id="chain-badge" class="badge">
            verified through seq {verdict.progress.throughSeq} of {verdict.progress.lastSeq}
            {inProgress(verdict)} · checking on
          </span>
        ) : verdict.ok ? (
          <span id="chain-badge" class="badge ok">
            verified · {verdict.rows} events
          </span>
        ) : (
          <span id="chain-badge" class="badge bad">
            broken at seq {verdict.brokenSeq} ({verdict.problem})
          </span>
        )}
      </p>
      <VerificationScope verdict={verdict} />
      <div class="card">
        <table>
          <thead>
            <tr>
              <th class="num">Seq</th>
              <th>When</th>
              <th>Type</th>
              <th>Reference</th>
              <th>Charge</th>
              <th class="num">Amount</th>
              <th>Hash</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr>
                <td class="num">{r.seq}</td>
                <td>
                  <When iso={r.createdAt} />
                </td>
                <td>{r.type}</td>
                <td class="mono">{r.reference}</td>
                <td>{r.chargeId ? <ChargeLink chargeId={r.chargeId} /> : null}</td>
                <td class="num">{usdOfBaseUnits(r.amountBaseUnits ?? BigInt(r.amountMinor ?? 0) * 10_000n)}</td>
                <td class="mono">{r.hash.slice(0, 16)}…</td>
              </tr>
            ))}
          </tbody>
        </table>
        {rows.length === TRANSACTIONS_SHOWN ? <p class="muted">The first 500 rows; the CSV has them all.</p> : null}
      </div>
    </>
  );
};
