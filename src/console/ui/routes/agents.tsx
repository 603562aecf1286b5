import { Hono } from "hono";
import { CreateAgentBody, CreditBody, FreezeBody } from "../../../agents/routes";
import { agentView, createAgent, getAgentAtHome, listAgentsAtHome } from "../../../agents/service";
import { walletOf } from "../../../agents/wallet.do";
import { listAgentX402Payments } from "../../../agents/x402-payments";
import type { AppEnv } from "../../../auth/app-env";
import { chargeView, listAgentChargesByPaidAt } from "../../../charges/service";
import { RollKeyBody, rollKey } from "../../../keys/roll";
import { placementOf } from "../../../ledger/place";
import { amountMinor } from "../../../lib/money";
import { AMOUNT_RULE, field, form, GRACE_RULE, graceFromForm, optionalDollars, policyFromForm } from "../forms";
import { ShownOnce, usd } from "../layout";
import { AgentPage } from "../pages/agent";
import { AgentsPage } from "../pages/agents";
import { OldKeyEnds } from "../pages/key-roll";
import { back, csrfOf, emailOf, render, type Ui } from "../render";

/** The agents the page lists. */
const agentsOf = async (c: Ui) => (await listAgentsAtHome(c.env, placementOf(c.env).control.db, 200)).map(agentView);

/**
 * One agent's page (with a secret shown once above it, after a key roll), or null for an unknown agent.
 * Its frozen state is read from D1, where the wallet object writes it.
 */
async function agentPage(c: Ui, agentId: string, extra: { notice?: string; shown?: (name: string) => unknown } = {}) {
  const agent = await getAgentAtHome(c.env, placementOf(c.env).control.db, agentId);
  if (!agent) return null;
  const [payments, x402Payments] = await Promise.all([
    listAgentChargesByPaidAt(c.env, agent.id, 20),
    listAgentX402Payments(c.env, agent.id, 20),
  ]);
  const page = (
    <AgentPage
      csrf={csrfOf(c)}
      agent={agentView(agent)}
      frozenAt={agent.frozenAt}
      payments={payments.map(chargeView)}
      x402Payments={x402Payments ?? []}
    />
  );
  return render(
    c,
    `Agent ${agent.name}`,
    "/console/ui/agents",
    <>
      {extra.shown?.(agent.name) as never}
      {page}
    </>,
    { notice: extra.notice },
  );
}

/** Agents: the list, creating one, and one agent's policy, credit, key roll and freeze, through its wallet object. */
export const agentRoutes = new Hono<AppEnv>()
  .get("/console/ui/agents", async (c) => {
    const agents = await agentsOf(c);
    return render(c, "Agents", "/console/ui/agents", <AgentsPage csrf={csrfOf(c)} agents={agents} />);
  })
  .post("/console/ui/agents", async (c) => {
    const body = await form(c);
    const policy = policyFromForm(body);
    const input = CreateAgentBody.safeParse({ name: field(body, "name"), policy: policy ?? undefined });
    const credit = optionalDollars(field(body, "credit"));
    if (!input.success || !policy || (credit !== null && !amountMinor.safeParse(credit).success)) {
      return render(c, "Agents", "/console/ui/agents", <AgentsPage csrf={csrfOf(c)} agents={await agentsOf(c)} />, {
        error: `Check the form: a name (up to 200 characters), and ${AMOUNT_RULE}.`,
      });
    }
    const { name } = input.data;
    const created = await createAgent(c.env, placementOf(c.env).control.db, { name, policy });
    if (credit) await walletOf(c.env, created.agentId).credit(created.agentId, credit, "console", emailOf(c));
    return render(
      c,
      "Agents",
      "/console/ui/agents",
      <>
        <ShownOnce label={`API key for agent ${name} (${created.agentId})`} value={created.apiKey} id="agent-key" />
        <AgentsPage csrf={csrfOf(c)} agents={await agentsOf(c)} />
      </>,
      { notice: `Agent ${created.agentId} created.` },
    );
  })
  .get("/console/ui/agents/:agentId", async (c) => (await agentPage(c, c.req.param("agentId"))) ?? c.notFound())
  .post("/console/ui/agents/:agentId/policy", async (c) => {
    const agentId = c.req.param("agentId");
    const policy = policyFromForm(await form(c));
    if (!policy) return back(c, ["agents", agentId], `Policy not saved: ${AMOUNT_RULE}.`);
    if (!(await walletOf(c.env, agentId).setPolicy(agentId, policy))) return c.notFound();
    return back(c, ["agents", agentId], "Policy saved.");
  })
  .post("/console/ui/agents/:agentId/credit", async (c) => {
    const agentId = c.req.param("agentId");
    const body = await form(c);
    const input = CreditBody.safeParse({
      amountUsdCents: optionalDollars(field(body, "amount")),
      reference: field(body, "reference") || undefined,
    });
    if (!input.success)
      return back(
        c,
        ["agents", agentId],
        "Credit not applied: enter whole cents above 0 (up to $1,000,000,000), and a reference of up to 200 characters.",
      );
    const cents = input.data.amountUsdCents;
    const result = await walletOf(c.env, agentId).credit(agentId, cents, input.data.reference ?? null, emailOf(c));
    if (!result.ok) return c.notFound();
    return back(c, ["agents", agentId], `Credited ${usd(cents)}; balance ${usd(result.balanceMinor)}.`);
  })
  // As POST /console/agents/:agentId/keys; the new key is shown on this answer only, never put in an address.
  .post("/console/ui/agents/:agentId/keys", async (c) => {
    const agentId = c.req.param("agentId");
    const input = RollKeyBody.safeParse(graceFromForm(await form(c)));
    if (!input.success) return back(c, ["agents", agentId], `Key not rolled: ${GRACE_RULE}.`);
    const rolled = await rollKey(
      c.env,
      { kind: "agent", id: agentId },
      input.data.graceSeconds,
      emailOf(c),
      async () => [],
    );
    if (!rolled) return c.notFound();
    const shown = (name: string) => (
      <ShownOnce label={`New API key for agent ${name} (${agentId})`} value={rolled.apiKey} id="agent-key">
        <OldKeyEnds rolled={rolled} />
      </ShownOnce>
    );
    return (await agentPage(c, agentId, { notice: "API key rolled.", shown })) ?? c.notFound();
  })
  // As POST /console/agents/:agentId/freeze and /unfreeze, through the agent's wallet object.
  .post("/console/ui/agents/:agentId/freeze", async (c) => {
    const agentId = c.req.param("agentId");
    const input = FreezeBody.safeParse({ reason: field(await form(c), "reason") || undefined });
    if (!input.success) return back(c, ["agents", agentId], "Not frozen: a reason is up to 200 characters.");
    const outcome = await walletOf(c.env, agentId).setFrozen(agentId, true, input.data.reason ?? null, emailOf(c));
    if (outcome === "not_found") return c.notFound();
    return back(
      c,
      ["agents", agentId],
      outcome === "done"
        ? "Frozen: its payments are refused until it is unfrozen."
        : "It was already frozen; nothing changed.",
    );
  })
  .post("/console/ui/agents/:agentId/unfreeze", async (c) => {
    const agentId = c.req.param("agentId");
    const outcome = await walletOf(c.env, agentId).setFrozen(agentId, false, null, emailOf(c));
    if (outcome === "not_found") return c.notFound();
    return back(
      c,
      ["agents", agentId],
      outcome === "done" ? "Unfrozen: its policy decides its payments again." : "It was not frozen; nothing changed.",
    );
  });
