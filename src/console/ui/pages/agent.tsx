import type { AgentX402PaymentView } from "../../../agents/x402-payments";
import type { ChargeView } from "../../../charges/service";
import { Csrf, usdOfBaseUnits, When } from "../layout";
import { AgentX402Payments } from "./agent-x402";
import { type AgentItem, PolicyFields } from "./agents";
import { ChargeLink } from "./charge";
import { GraceSelect } from "./key-roll";

/** One agent: its balance and state, its policy, credit, key roll and freeze forms, its recent payments and its x402 payments. */
export const AgentPage = (props: {
  csrf: string;
  agent: AgentItem;
  frozenAt: string | null;
  payments: ChargeView[];
  x402Payments: AgentX402PaymentView[];
}) => (
  <>
    {props.agent.frozen ? <FrozenBanner csrf={props.csrf} agent={props.agent} frozenAt={props.frozenAt} /> : null}
    <AgentFigures agent={props.agent} />
    <form method="post" action={`/console/ui/agents/${props.agent.agentId}/policy`} class="card">
      <Csrf token={props.csrf} />
      <h2>Policy</h2>
      <PolicyFields policy={props.agent.policy} />
      <button type="submit">Save policy</button>
    </form>
    <AgentForms csrf={props.csrf} agent={props.agent} />
    <h2>Recent payments</h2>
    <RecentPayments payments={props.payments} />
    <h2>x402 payments</h2>
    <AgentX402Payments payments={props.x402Payments} />
  </>
);

/** The agent's balance, whether it is frozen, and its deposit address. */
const AgentFigures = (props: { agent: AgentItem }) => (
  <div class="cards">
    <div class="stat">
      Balance<b id="agent-balance">{usdOfBaseUnits(props.agent.balanceBaseUnits)}</b>
    </div>
    <div class="stat">
      Status
      {props.agent.frozen ? (
        <b id="agent-status" class="bad">
          Frozen
        </b>
      ) : (
        <b id="agent-status" class="ok">
          Active
        </b>
      )}
    </div>
    <div class="stat">
      Deposit address<span class="mono">{props.agent.depositAddress ?? "not configured"}</span>
    </div>
  </div>
);

/** What an operator does to the agent: credit its wallet, roll its key, freeze it (while it is not). */
const AgentForms = (props: { csrf: string; agent: AgentItem }) => (
  <div class="cards">
    <form method="post" action={`/console/ui/agents/${props.agent.agentId}/credit`} class="card">
      <Csrf token={props.csrf} />
      <h2>Credit the wallet</h2>
      <label for="c-amount">Amount ($)</label>
      <input id="c-amount" name="amount" inputmode="decimal" required />
      <label for="c-reference">Reference (optional)</label>
      <input id="c-reference" name="reference" maxlength={200} />
      <div class="actions">
        <button type="submit">Credit</button>
      </div>
    </form>
    <form
      method="post"
      action={`/console/ui/agents/${props.agent.agentId}/keys`}
      class="card"
      onsubmit={`return confirm('Roll the API key of ${props.agent.agentId}?')`}
    >
      <Csrf token={props.csrf} />
      <h2>Roll API key</h2>
      <p class="muted">A new key, shown once. The agent must switch to it before the old one ends.</p>
      <label for="k-grace">The old key</label>
      <GraceSelect id="k-grace" />
      <div class="actions">
        <button type="submit" id="roll-key">
          Roll API key
        </button>
      </div>
    </form>
    {props.agent.frozen ? null : (
      <form method="post" action={`/console/ui/agents/${props.agent.agentId}/freeze`} class="card">
        <Csrf token={props.csrf} />
        <h2>Freeze</h2>
        <p class="muted">Refuses every payment of this agent until it is unfrozen; reads keep working.</p>
        <label for="f-reason">Reason (optional)</label>
        <input id="f-reason" name="reason" maxlength={200} />
        <div class="actions">
          <button type="submit" class="danger" id="freeze">
            Freeze agent
          </button>
        </div>
      </form>
    )}
  </div>
);

/** The agent's payments, most recently paid first. */
const RecentPayments = (props: { payments: ChargeView[] }) => (
  <div class="card">
    <table>
      <thead>
        <tr>
          <th>Charge</th>
          <th>Merchant</th>
          <th class="num">Amount</th>
          <th>Method</th>
          <th>Reference</th>
          <th>Paid</th>
        </tr>
      </thead>
      <tbody>
        {props.payments.map((p) => (
          <tr>
            <td>
              <ChargeLink chargeId={p.chargeId} />
            </td>
            <td>
              <code>{p.merchantId}</code>
            </td>
            <td class="num">{usdOfBaseUnits(p.amountBaseUnits)}</td>
            <td>{p.method}</td>
            <td class="mono">{p.reference}</td>
            <td>
              <When iso={p.paidAt} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);

/** A frozen agent, plain at the top of its page: since when, why, and the way back. */
const FrozenBanner = (props: { csrf: string; agent: AgentItem; frozenAt: string | null }) => (
  <div class="frozen-banner" id="frozen-banner" role="alert">
    <strong>FROZEN</strong>
    <span>
      Every payment of this agent is refused
      {props.frozenAt ? ` since ${props.frozenAt.slice(0, 10)} ${props.frozenAt.slice(11, 19)} UTC` : ""}.
      <br />
      Reason: <span id="frozen-reason">{props.agent.frozenReason ?? "none given"}</span>
    </span>
    <form method="post" action={`/console/ui/agents/${props.agent.agentId}/unfreeze`} class="inline">
      <Csrf token={props.csrf} />
      <button type="submit" id="unfreeze">
        Unfreeze
      </button>
    </form>
  </div>
);
