import type { agentView } from "../../../agents/service";
import { dollarsField } from "../forms";
import { Csrf, usd, usdOfBaseUnits, When } from "../layout";

export type AgentItem = ReturnType<typeof agentView>;

/** The policy's limits: the form's field (in dollars) and the policy's own (in cents), in the order shown. */
const LIMIT_FIELDS = [
  ["maxPerTransactionUsd", "maxPerTransactionUsdCents", "Max per transaction ($)"],
  ["dailyLimitUsd", "dailyLimitUsdCents", "Daily limit ($)"],
  ["approvalThresholdUsd", "approvalThresholdUsdCents", "Approval threshold ($)"],
] as const;

/** The policy's limits as form fields in dollars, empty for no limit. */
export const PolicyFields = (props: { policy?: AgentItem["policy"] }) => (
  <div class="fields">
    {LIMIT_FIELDS.map(([name, limit, label]) => (
      <div>
        <label for={`policy-${name}`}>{label}</label>
        <input id={`policy-${name}`} name={name} inputmode="decimal" value={dollarsField(props.policy?.[limit])} />
      </div>
    ))}
    <div>
      <label for="policy-allowedCategories">Allowed categories</label>
      <input
        id="policy-allowedCategories"
        name="allowedCategories"
        aria-describedby="policy-allowedCategories-hint"
        value={props.policy?.allowedCategories?.join(", ") ?? ""}
      />
      <small class="hint" id="policy-allowedCategories-hint">
        Comma-separated; empty allows any.
      </small>
    </div>
    <div>
      <label for="policy-allowedX402Hosts">x402 hosts it may pay</label>
      <input
        id="policy-allowedX402Hosts"
        name="allowedX402Hosts"
        aria-describedby="policy-allowedX402Hosts-hint"
        value={props.policy?.allowedX402Hosts?.join(", ") ?? ""}
      />
      <small class="hint" id="policy-allowedX402Hosts-hint">
        Comma-separated host names, or *; empty: it pays no x402 paywall.
      </small>
    </div>
  </div>
);

/** The agent list and the form that creates one. */
export const AgentsPage = (props: { csrf: string; agents: AgentItem[] }) => (
  <>
    <form method="post" action="/console/ui/agents" class="card">
      <Csrf token={props.csrf} />
      <h2>Create an agent</h2>
      <label for="a-name">Name</label>
      <input id="a-name" name="name" required maxlength={200} />
      <PolicyFields />
      <label for="a-credit">Initial credit ($, optional)</label>
      <input id="a-credit" name="credit" inputmode="decimal" />
      <button type="submit">Create agent</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>Agent</th>
            <th class="num">Balance</th>
            <th>Policy</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {props.agents.map((a) => (
            <tr class={a.frozen ? "frozen" : undefined}>
              <td>
                <a href={`/console/ui/agents/${a.agentId}`}>{a.name}</a>
                {a.frozen ? (
                  <span class="badge frozen" title={a.frozenReason ?? "no reason given"}>
                    frozen
                  </span>
                ) : null}
                <br />
                <code>{a.agentId}</code>
              </td>
              <td class="num">{usdOfBaseUnits(a.balanceBaseUnits)}</td>
              <td class="muted">{policySummary(a.policy)}</td>
              <td>
                <When iso={a.createdAt} dateOnly />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);

/** A policy in a few words for the list. */
const policySummary = (p: AgentItem["policy"]) =>
  [
    p.maxPerTransactionUsdCents !== null ? `≤ ${usd(p.maxPerTransactionUsdCents)} each` : null,
    p.dailyLimitUsdCents !== null ? `${usd(p.dailyLimitUsdCents)}/day` : null,
    p.approvalThresholdUsdCents !== null ? `approval over ${usd(p.approvalThresholdUsdCents)}` : null,
    p.allowedCategories?.length ? `only ${p.allowedCategories.join(", ")}` : null,
    p.allowedX402Hosts?.length ? `x402 on ${p.allowedX402Hosts.join(", ")}` : null,
  ]
    .filter(Boolean)
    .join(" · ") || "no limits";
