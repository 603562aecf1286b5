import type { AuditRow, ChainVerdict } from "../../../audit/chain";
import { usd, When } from "../layout";
import { ChargeLink } from "./charge";

/** The page shows this many rows; the CSV has them all. */
export const TRANSACTIONS_SHOWN = 500;

/** The audit rows of a range of days, the chain's verdict, and the CSV of the same range. */
export const TransactionsPage = (props: {
  range: { fromDay: string; toDay: string };
  rows: AuditRow[];
  verdict: ChainVerdict;
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
        {verdict.ok ? (
          <span id="chain-badge" class="badge ok">
            verified · {verdict.rows} events
          </span>
        ) : (
          <span id="chain-badge" class="badge bad">
            broken at seq {verdict.brokenSeq} ({verdict.problem})
          </span>
        )}
      </p>
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
                <td class="num">{usd(r.amountMinor)}</td>
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
