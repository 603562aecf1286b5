import { counted, HourlyChart, usd } from "../layout";
import type { Overview } from "../queries";

/** The overview: today's totals and paid volume by hour. */
export const OverviewPage = (props: { overview: Overview }) => {
  const { paid, createdToday, pendingApprovals, merchants, agents, paidCentsByHour } = props.overview;
  return (
    <>
      <div class="grid">
        <div class="stat">
          Paid today<b>{usd(paid.cents)}</b>
          <span class="muted">{counted(paid.n, "payment")}</span>
        </div>
        <div class="stat">
          Charges created today<b>{createdToday}</b>
        </div>
        <div class="stat">
          Pending approvals<b class={pendingApprovals > 0 ? "warn" : ""}>{pendingApprovals}</b>
          <a href="/console/ui/approvals">Review</a>
        </div>
        <div class="stat">
          Merchants / agents
          <b>
            {merchants} / {agents}
          </b>
        </div>
      </div>
      <h2>Paid volume by hour (UTC, today)</h2>
      <div class="card">
        <HourlyChart cents={paidCentsByHour} />
      </div>
    </>
  );
};
