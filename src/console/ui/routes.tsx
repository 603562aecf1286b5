import { Hono, type Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../../app-env";
import { rollKey, RollKeyBody, type RolledKey } from "../../keys/roll";
import { actorOf } from "../../auth/middleware";
import { CreateAgentBody, CreditBody, FreezeBody } from "../../agents/routes";
import { agentView, createAgent, getAgent, listAgents } from "../../agents/service";
import { normalizePolicy, PolicySchema } from "../../agents/policy";
import { walletOf } from "../../agents/wallet.do";
import { checkApprovalOpen } from "../../agents/wallet";
import { approvalView, getApproval, listApprovals, rejectApproval } from "../../approvals/service";
import { csvExportResponse } from "../../audit/csv";
import { ExportQuery, exportRange } from "../../audit/routes";
import { auditPage, auditRowOf, auditRows } from "../../audit/service";
import { chargeView } from "../../charges/service";
import { screenAddress, EVM_ADDRESS } from "../../kyt/screening";
import { verifyChain } from "../../audit/chain";
import { ApiError } from "../../lib/errors";
import { amountMinor } from "../../lib/money";
import { nowIso, utcDayStart } from "../../lib/time";
import { RegisterBody } from "../../merchants/routes";
import { consoleMerchantView, getMerchant, listMerchants, registerMerchant } from "../../merchants/service";
import { redeliver, type RedeliverOutcome } from "../../webhooks/dispatch";
import {
  createEndpoint,
  deliveryView,
  endpointView,
  getUndeletedEndpoint,
  listAttempts,
  listDeliveries,
  listEndpoints,
} from "../../webhooks/endpoints";
import { EVENT_TYPES } from "../../webhooks/outbox";
import { CreateBody as CreateEndpointBody } from "../../webhooks/routes";
import { checkWebhookUrl } from "../../webhooks/url-guard";
import { receivingReport, type ReceivingReport } from "../../x402/receiving";
import { consoleUsers } from "../../db/schema";
import { clientAddressOf, limitSignIn, SignInEmail } from "../auth-routes";
import { normalizeEmail, revokeSession, startEmailSignIn, verifyEmailSignIn } from "../sign-in";
import { Csrf, HourlyChart, Page, ShownOnce, usd } from "./layout";
import {
  checkPreSessionCsrf,
  clearSessionCookie,
  CSRF_REFUSED,
  parseForm,
  preSessionCsrf,
  requirePageSession,
  setSessionCookie,
} from "./session";
import { issuesOf } from "../../lib/validation";

type Ui = Context<AppEnv>;
const csrfOf = (c: Ui) => c.get("csrf") ?? "";

const form = async (c: Ui) => (await parseForm(c)) as Record<string, string | File>;
const field = (body: Record<string, string | File>, name: string) =>
  typeof body[name] === "string" ? (body[name] as string).trim() : "";
const optionalCents = (text: string) => (text === "" ? null : /^\d+$/.test(text) ? Number(text) : Number.NaN);
const emailOf = (c: Ui) => actorOf(c.get("actor"), "console").email;
const noticeOf = (c: Ui) => c.req.query("notice") ?? null;

/** Renders a page with the session's e-mail and CSRF token. */
const render = (
  c: Ui,
  title: string,
  path: string,
  body: unknown,
  extra: { notice?: string | null; error?: string | null } = {},
) =>
  c.html(
    <Page
      title={title}
      path={path}
      email={emailOf(c)}
      csrf={csrfOf(c)}
      notice={extra.notice ?? noticeOf(c)}
      error={extra.error ?? null}
    >
      {body as never}
    </Page>,
  );

/** Back to a page with a notice; every path segment is encoded, since some come from the request. */
const back = (c: Ui, segments: string[], notice: string) =>
  c.redirect(`/console/ui/${segments.map(encodeURIComponent).join("/")}?notice=${encodeURIComponent(notice)}`, 303);

const REDELIVER_NOTICE: Record<Exclude<RedeliverOutcome, "endpoint_not_found">, string> = {
  queued: "Queued for redelivery.",
  delivery_not_found: "No such delivery for this endpoint.",
  not_redeliverable: "Only a delivered or failed delivery to an active endpoint can be sent again.",
};

const SignInForm = (props: { csrf: string; email?: string; step: "email" | "code" }) =>
  props.step === "email" ? (
    <form method="post" action="/console/sign-in" class="card">
      <input type="hidden" name="_csrf" value={props.csrf} />
      <label for="email">E-mail</label>
      <input id="email" name="email" type="email" required autocomplete="email" />
      <button type="submit">Send me a code</button>
    </form>
  ) : (
    <form method="post" action="/console/sign-in/verify" class="card">
      <input type="hidden" name="_csrf" value={props.csrf} />
      <input type="hidden" name="email" value={props.email ?? ""} />
      <p>If {props.email} may use the console, a 6-digit code is on its way. It is valid for 10 minutes.</p>
      <label for="code">Code</label>
      <input
        id="code"
        name="code"
        inputmode="numeric"
        pattern="\d{6}"
        maxlength={6}
        required
        autocomplete="one-time-code"
      />
      <button type="submit">Sign in</button>
      <p class="muted">
        <a href="/console/sign-in">Use another address, or ask for a new code</a>
      </p>
    </form>
  );

/**
 * The sign-in pages' rate limits, as the JSON routes': a page answering 429 with Retry-After,
 * back at the e-mail step (a new code starts there), or null when the attempt may go on.
 */
async function signInLimited(c: Ui, email: string, kind: "start" | "verify", csrf: string) {
  try {
    await limitSignIn(c.env.DB, email, clientAddressOf(c.req.header("cf-connecting-ip")), kind);
    return null;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 429)) throw error;
    const retryAfter = error.headers?.["Retry-After"] ?? "60";
    const minutes = Math.max(1, Math.ceil(Number(retryAfter) / 60));
    c.header("Retry-After", retryAfter);
    return c.html(
      <Page title="Sign in" error={`Too many attempts; try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`}>
        {<SignInForm csrf={csrf} step="email" />}
      </Page>,
      429,
    );
  }
}

export const consoleUiRoutes = new Hono<AppEnv>()
  .get("/console", (c) => c.redirect("/console/ui", 302))
  .get("/console/sign-in", async (c) => {
    const csrf = await preSessionCsrf(c);
    return c.html(<Page title="Sign in">{<SignInForm csrf={csrf} step="email" />}</Page>);
  })
  .post("/console/sign-in", async (c) => {
    const body = await form(c);
    if (!(await checkPreSessionCsrf(c, body._csrf))) throw CSRF_REFUSED;
    const email = SignInEmail.safeParse(body.email);
    const csrf = await preSessionCsrf(c);
    if (!email.success)
      return c.html(
        <Page title="Sign in" error="Enter a valid e-mail address.">
          {<SignInForm csrf={csrf} step="email" />}
        </Page>,
        400,
      );
    const limited = await signInLimited(c, email.data, "start", csrf);
    if (limited) return limited;
    await startEmailSignIn(c.env, c.get("db"), c.get("settings"), email.data, (work) => c.executionCtx.waitUntil(work));
    return c.html(
      <Page title="Sign in">{<SignInForm csrf={csrf} step="code" email={normalizeEmail(email.data)} />}</Page>,
    );
  })
  .post("/console/sign-in/verify", async (c) => {
    const body = await form(c);
    if (!(await checkPreSessionCsrf(c, body._csrf))) throw CSRF_REFUSED;
    const email = SignInEmail.safeParse(body.email);
    const code = field(body, "code");
    const csrf = await preSessionCsrf(c);
    // The address keys a stored rate-limit counter: only a valid one (at most 254 characters) gets that far.
    if (!email.success)
      return c.html(
        <Page title="Sign in" error="Enter a valid e-mail address.">
          {<SignInForm csrf={csrf} step="email" />}
        </Page>,
        400,
      );
    const limited = await signInLimited(c, email.data, "verify", csrf);
    if (limited) return limited;
    const session = /^\d{6}$/.test(code)
      ? await verifyEmailSignIn(c.env, c.get("db"), c.get("settings"), email.data, code)
      : null;
    if (!session)
      return c.html(
        <Page title="Sign in" error="That code is not valid. Ask for a new one if it expired.">
          {<SignInForm csrf={csrf} step="code" email={normalizeEmail(email.data)} />}
        </Page>,
        401,
      );
    setSessionCookie(c, session.token, session.expiresAt);
    return c.redirect("/console/ui", 303);
  })
  .post("/console/sign-out", requirePageSession, async (c) => {
    const actor = actorOf(c.get("actor"), "console");
    if (actor.jti && actor.expiresAt) await revokeSession(c.env, actor.jti, actor.expiresAt);
    clearSessionCookie(c);
    return c.redirect("/console/sign-in", 303);
  })
  .use("/console/ui", requirePageSession)
  .use("/console/ui/*", requirePageSession)

  .get("/console/ui", async (c) => {
    const db = c.env.DB;
    const dayStart = utcDayStart();
    const [totals, byHour, pending, counts] = await db.batch([
      db
        .prepare(
          "SELECT COUNT(*) AS n, COALESCE(SUM(amount_minor), 0) AS cents FROM charges WHERE status = 'paid' AND paid_at >= ?",
        )
        .bind(dayStart),
      db
        .prepare(
          "SELECT CAST(substr(paid_at, 12, 2) AS INTEGER) AS hour, SUM(amount_minor) AS cents FROM charges WHERE status = 'paid' AND paid_at >= ? GROUP BY hour",
        )
        .bind(dayStart),
      db.prepare("SELECT COUNT(*) AS n FROM approvals WHERE status = 'pending' AND expires_at > ?").bind(nowIso()),
      db
        .prepare(
          "SELECT (SELECT COUNT(*) FROM merchants) AS merchants, (SELECT COUNT(*) FROM agents) AS agents, (SELECT COUNT(*) FROM charges WHERE created_at >= ?) AS created",
        )
        .bind(dayStart),
    ]);
    const t = totals!.results[0] as { n: number; cents: number };
    const hours = Array<number>(24).fill(0);
    for (const row of byHour!.results as { hour: number; cents: number }[]) hours[row.hour] = row.cents;
    const k = counts!.results[0] as { merchants: number; agents: number; created: number };
    const pendingCount = (pending!.results[0] as { n: number }).n;
    return render(
      c,
      "Overview",
      "/console/ui",
      <>
        <div class="grid">
          <div class="stat">
            Paid today<b>{usd(t.cents)}</b>
            <span class="muted">{t.n} payments</span>
          </div>
          <div class="stat">
            Charges created today<b>{k.created}</b>
          </div>
          <div class="stat">
            Pending approvals<b class={pendingCount > 0 ? "warn" : ""}>{pendingCount}</b>
            <a href="/console/ui/approvals">Review</a>
          </div>
          <div class="stat">
            Merchants / agents
            <b>
              {k.merchants} / {k.agents}
            </b>
          </div>
        </div>
        <h2>Paid volume by hour (UTC, today)</h2>
        <div class="card">
          <HourlyChart cents={hours} />
        </div>
      </>,
    );
  })

  .get("/console/ui/merchants", async (c) => {
    const merchants = (await listMerchants(c.get("db"), 200)).map(consoleMerchantView);
    return render(c, "Merchants", "/console/ui/merchants", <MerchantsPage csrf={csrfOf(c)} merchants={merchants} />);
  })
  .post("/console/ui/merchants", async (c) => {
    const body = await form(c);
    // The API's own rules (RegisterBody), so the page stores nothing the API would refuse.
    const input = RegisterBody.safeParse({ name: field(body, "name"), category: field(body, "category") || undefined });
    const merchants = () => listMerchants(c.get("db"), 200).then((rows) => rows.map(consoleMerchantView));
    if (!input.success) {
      return render(
        c,
        "Merchants",
        "/console/ui/merchants",
        <MerchantsPage csrf={csrfOf(c)} merchants={await merchants()} />,
        {
          error: "A merchant needs a name (up to 200 characters); a category is up to 64.",
        },
      );
    }
    const { name } = input.data;
    const created = await registerMerchant(c.get("db"), input.data);
    return render(
      c,
      "Merchants",
      "/console/ui/merchants",
      <>
        <ShownOnce label={`API key for ${name} (${created.merchantId})`} value={created.apiKey} id="merchant-key" />
        <MerchantsPage csrf={csrfOf(c)} merchants={await merchants()} />
      </>,
      { notice: `Merchant ${created.merchantId} registered.` },
    );
  })

  // As POST /console/merchants/:merchantId/keys; the new key is shown on this answer only.
  .post("/console/ui/merchants/:merchantId/keys", async (c) => {
    const merchantId = c.req.param("merchantId");
    const input = RollKeyBody.safeParse(graceFromForm(await form(c)));
    if (!input.success) return back(c, ["merchants"], `Key not rolled: ${GRACE_RULE}.`);
    const merchant = await getMerchant(c.get("db"), merchantId);
    const rolled =
      merchant &&
      (await rollKey(c.env, { kind: "merchant", id: merchantId }, input.data.graceSeconds, emailOf(c), async () => []));
    if (!merchant || !rolled) return c.notFound();
    const merchants = (await listMerchants(c.get("db"), 200)).map(consoleMerchantView);
    return render(
      c,
      "Merchants",
      "/console/ui/merchants",
      <>
        <ShownOnce label={`New API key for ${merchant.name} (${merchantId})`} value={rolled.apiKey} id="merchant-key">
          <OldKeyEnds rolled={rolled} />
        </ShownOnce>
        <MerchantsPage csrf={csrfOf(c)} merchants={merchants} />
      </>,
      { notice: `API key of ${merchantId} rolled.` },
    );
  })

  .get("/console/ui/agents", async (c) => {
    const agents = (await listAgents(c.get("db"), 200)).map(agentView);
    return render(c, "Agents", "/console/ui/agents", <AgentsPage csrf={csrfOf(c)} agents={agents} />);
  })
  .post("/console/ui/agents", async (c) => {
    const body = await form(c);
    const policy = policyFromForm(body);
    const input = CreateAgentBody.safeParse({ name: field(body, "name"), policy: policy ?? undefined });
    const credit = optionalCents(field(body, "credit"));
    const agents = () => listAgents(c.get("db"), 200).then((rows) => rows.map(agentView));
    if (!input.success || !policy || (credit !== null && !amountMinor.safeParse(credit).success)) {
      return render(c, "Agents", "/console/ui/agents", <AgentsPage csrf={csrfOf(c)} agents={await agents()} />, {
        error: `Check the form: a name (up to 200 characters), and ${AMOUNT_RULE}.`,
      });
    }
    const { name } = input.data;
    const created = await createAgent(c.env, c.get("db"), { name, policy });
    if (credit) await walletOf(c.env, created.agentId).credit(created.agentId, credit, "console", emailOf(c));
    return render(
      c,
      "Agents",
      "/console/ui/agents",
      <>
        <ShownOnce label={`API key for agent ${name} (${created.agentId})`} value={created.apiKey} id="agent-key" />
        <AgentsPage csrf={csrfOf(c)} agents={await agents()} />
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
      amountUsdCents: optionalCents(field(body, "amount")),
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
  })

  .get("/console/ui/approvals", async (c) => {
    const approvals = (await listApprovals(c.get("db"), "pending", 200)).map(approvalView);
    return render(c, "Approvals", "/console/ui/approvals", <ApprovalsPage csrf={csrfOf(c)} approvals={approvals} />);
  })
  .post("/console/ui/approvals/:id/:decision{grant|reject}", async (c) => {
    const approval = await getApproval(c.get("db"), c.req.param("id"));
    if (!approval) return c.notFound();
    if (c.req.param("decision") === "grant") {
      const outcome = await walletOf(c.env, approval.agentId).grantApproval(approval.agentId, approval.id, emailOf(c));
      return back(
        c,
        ["approvals"],
        outcome.kind === "paid"
          ? `Granted: charge ${outcome.charge.chargeId} is paid.`
          : `Not granted: ${outcome.kind === "approval" ? "still held" : outcome.kind === "frozen" ? "the agent is frozen" : outcome.reason}.`,
      );
    }
    const closed = await checkApprovalOpen(c.env, approval, Date.now());
    const rejected = !closed && (await rejectApproval(c.get("db"), approval.id, emailOf(c)));
    return back(
      c,
      ["approvals"],
      rejected
        ? `Rejected; charge ${approval.chargeId} stays pending.`
        : "That approval was already decided or expired.",
    );
  })

  .get("/console/ui/webhooks", async (c) => {
    const [endpoints, merchants] = await Promise.all([listEndpoints(c.get("db")), listMerchants(c.get("db"), 500)]);
    return render(
      c,
      "Webhooks",
      "/console/ui/webhooks",
      <WebhooksPage
        csrf={csrfOf(c)}
        endpoints={endpoints.map(endpointView)}
        merchants={merchants.map(consoleMerchantView)}
      />,
    );
  })
  .post("/console/ui/webhooks", async (c) => {
    const body = await parseForm(c, { all: true });
    const url = typeof body.url === "string" ? body.url.trim() : "";
    const events = [
      ...new Set(
        [body.events ?? []]
          .flat()
          .filter(
            (e): e is (typeof EVENT_TYPES)[number] =>
              typeof e === "string" && (EVENT_TYPES as readonly string[]).includes(e),
          ),
      ),
    ];
    const merchantId = typeof body.merchantId === "string" && body.merchantId ? body.merchantId : null;
    const settings = c.get("settings");
    const input = CreateEndpointBody.safeParse({ url, events, merchantId: merchantId ?? undefined });
    const verdict = checkWebhookUrl(url, settings.environment);
    const page = async (extra: { notice?: string; error?: string }, shown?: unknown) => {
      const [endpoints, merchants] = await Promise.all([listEndpoints(c.get("db")), listMerchants(c.get("db"), 500)]);
      return render(
        c,
        "Webhooks",
        "/console/ui/webhooks",
        <>
          {shown as never}
          <WebhooksPage
            csrf={csrfOf(c)}
            endpoints={endpoints.map(endpointView)}
            merchants={merchants.map(consoleMerchantView)}
          />
        </>,
        extra,
      );
    };
    if (!input.success)
      return page({ error: "Check the form: a URL of up to 2,048 characters, and a merchant from the list." });
    if (!verdict.ok) return page({ error: `That URL is refused (${verdict.reason}).` });
    if (merchantId && !(await getMerchant(c.get("db"), merchantId))) return page({ error: "No such merchant." });
    const { row, secret } = await createEndpoint(c.get("db"), settings.webhookSecretsKey, {
      url: verdict.url.toString(),
      events,
      merchantId,
      createdBy: emailOf(c),
    });
    return page(
      { notice: `Endpoint ${row.id} created.` },
      <ShownOnce label={`Signing secret for ${row.url}`} value={secret} id="webhook-secret" />,
    );
  })
  .get("/console/ui/webhooks/:id", async (c) => {
    // As the deliveries API: an endpoint the service disabled keeps its deliveries readable.
    const endpoint = await getUndeletedEndpoint(c.get("db"), c.req.param("id"));
    if (!endpoint) return c.notFound();
    const deliveries = (await listDeliveries(c.get("db"), endpoint.id, 100)).map(deliveryView);
    return render(
      c,
      `Deliveries to ${endpoint.url}`,
      "/console/ui/webhooks",
      <DeliveriesPage csrf={csrfOf(c)} endpointId={endpoint.id} deliveries={deliveries} />,
    );
  })
  .get("/console/ui/webhooks/:id/deliveries/:deliveryId", async (c) => {
    const attempts = await listAttempts(c.get("db"), c.req.param("deliveryId"));
    return render(
      c,
      "Delivery attempts",
      "/console/ui/webhooks",
      <div class="card">
        <table>
          <thead>
            <tr>
              <th>#</th>
              <th>When</th>
              <th>Status code</th>
              <th>Error</th>
              <th class="num">ms</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((a) => (
              <tr>
                <td>{a.attempt}</td>
                <td>{a.createdAt}</td>
                <td>{a.statusCode ?? "—"}</td>
                <td>{a.error ?? ""}</td>
                <td class="num">{a.durationMs}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>,
    );
  })
  .post("/console/ui/webhooks/:id/deliveries/:deliveryId/redeliver", async (c) => {
    const { id, deliveryId } = c.req.param();
    const outcome = await redeliver(c.env, id, deliveryId);
    // A removed endpoint has no page to go back to.
    if (outcome === "endpoint_not_found") return back(c, ["webhooks"], "No such webhook endpoint.");
    return back(c, ["webhooks", id], REDELIVER_NOTICE[outcome]);
  })

  .get("/console/ui/kyt", (c) => render(c, "KYT screening", "/console/ui/kyt", <KytForm csrf={csrfOf(c)} />))
  .post("/console/ui/kyt", async (c) => {
    const address = field(await form(c), "address");
    if (!EVM_ADDRESS.test(address))
      return render(c, "KYT screening", "/console/ui/kyt", <KytForm csrf={csrfOf(c)} />, {
        error: "Enter an EVM address: 0x and 40 hex digits.",
      });
    const result = await screenAddress(c.get("db"), address);
    return render(
      c,
      "KYT screening",
      "/console/ui/kyt",
      <>
        <div class="card">
          <p class="mono">{address}</p>
          <p>
            Verdict:{" "}
            <span id="kyt-verdict" class={`badge ${result.verdict === "pass" ? "ok" : "bad"}`}>
              {result.verdict}
            </span>{" "}
            <span class="muted">{result.reason}</span>
          </p>
        </div>
        <KytForm csrf={csrfOf(c)} />
      </>,
    );
  })

  .get("/console/ui/transactions", async (c) => {
    const query = z.object({ from: z.string().optional(), to: z.string().optional() }).parse(c.req.query());
    let range: ReturnType<typeof exportRange>;
    try {
      range = exportRange(query.from || undefined, query.to || undefined);
    } catch {
      range = exportRange(undefined, undefined);
    }
    const db = c.get("db");
    const [rows, verdict] = await Promise.all([
      auditPage(db, 0, 500, range).then((r) => r.map(auditRowOf)),
      verifyChain(auditRows(db)),
    ]);
    const csvHref = `/console/ui/transactions.csv?from=${range.fromDay}&to=${range.toDay}`;
    return render(
      c,
      "Transactions",
      "/console/ui/transactions",
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
                <th class="num">Amount</th>
                <th>Hash</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr>
                  <td class="num">{r.seq}</td>
                  <td>{r.createdAt}</td>
                  <td>{r.type}</td>
                  <td class="mono">{r.reference}</td>
                  <td class="num">{usd(r.amountMinor)}</td>
                  <td class="mono">{r.hash.slice(0, 16)}…</td>
                </tr>
              ))}
            </tbody>
          </table>
          {rows.length === 500 ? <p class="muted">The first 500 rows; the CSV has them all.</p> : null}
        </div>
      </>,
    );
  })
  .get("/console/ui/receiving", async (c) => {
    const x = c.get("settings").x402;
    const body = x ? (
      <ReceivingPage report={await receivingReport(c.env, x, 200)} />
    ) : (
      <p class="muted">x402 is not configured on this deployment.</p>
    );
    return render(c, "Receiving addresses", "/console/ui/receiving", body);
  })
  .get("/console/ui/transactions.csv", (c) => {
    const query = ExportQuery.safeParse(c.req.query());
    if (!query.success) throw new ApiError(400, "invalid_request", { issues: issuesOf(query.error) });
    return csvExportResponse(c.get("db"), exportRange(query.data.from, query.data.to));
  })

  .get("/console/ui/users", async (c) => {
    const added = await c.get("db").select().from(consoleUsers).all();
    return render(
      c,
      "Console users",
      "/console/ui/users",
      <UsersPage csrf={csrfOf(c)} configured={c.get("settings").consoleUsers} added={added} />,
    );
  })
  .post("/console/ui/users", async (c) => {
    const email = z
      .string()
      .trim()
      .email()
      .safeParse(field(await form(c), "email"));
    if (!email.success) return back(c, ["users"], "Enter a valid e-mail address.");
    await c
      .get("db")
      .insert(consoleUsers)
      .values({ email: normalizeEmail(email.data), addedBy: emailOf(c), createdAt: nowIso() })
      .onConflictDoNothing();
    return back(c, ["users"], `${normalizeEmail(email.data)} may now sign in.`);
  });

/**
 * One agent's page (with a secret shown once above it, after a key roll), or null for an unknown agent.
 * Its frozen state is read from D1, where the wallet object writes it.
 */
async function agentPage(c: Ui, agentId: string, extra: { notice?: string; shown?: (name: string) => unknown } = {}) {
  const agent = await getAgent(c.get("db"), agentId);
  if (!agent) return null;
  const payments = await c.env.DB.prepare(
    `SELECT id, merchant_id AS merchantId, agent_id AS agentId, amount_minor AS amountMinor, currency, description, external_id AS externalId,
     status, method, reference, created_at AS createdAt, paid_at AS paidAt FROM charges WHERE agent_id = ? ORDER BY paid_at DESC LIMIT 20`,
  )
    .bind(agent.id)
    .all();
  const page = (
    <AgentPage
      csrf={csrfOf(c)}
      agent={agentView(agent)}
      frozenAt={agent.frozenAt}
      payments={(payments.results as never[]).map(chargeView)}
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

/** The grace of a key roll from its form: the select's seconds, or RollKeyBody's default when the field is absent. */
const graceFromForm = (body: Record<string, string | File>) => {
  const text = field(body, "graceSeconds");
  return text === "" ? {} : { graceSeconds: /^\d+$/.test(text) ? Number(text) : Number.NaN };
};

/** What RollKeyBody accepts. */
const GRACE_RULE = "the old key's grace is whole seconds from 0 to 604,800 (7 days)";

/** The choices of grace the pages offer; the API takes any number of seconds up to 7 days. */
const GRACE_CHOICES = [
  [0, "End the old key now"],
  [3_600, "Old key works 1 more hour"],
  [86_400, "Old key works 1 more day"],
  [604_800, "Old key works 7 more days"],
] as const;

const GraceSelect = (props: { id: string }) => (
  <select id={props.id} name="graceSeconds" aria-label="How long the old key keeps working">
    {GRACE_CHOICES.map(([seconds, label]) => (
      <option value={String(seconds)} selected={seconds === 86_400}>
        {label}
      </option>
    ))}
  </select>
);

/** When the replaced key stops working, beside the new key. */
const OldKeyEnds = (props: { rolled: RolledKey }) => {
  const at = props.rolled.previousKeyExpiresAt;
  const when = <time id="old-key-expires" datetime={at}>{`${at.slice(0, 10)} ${at.slice(11, 19)} UTC`}</time>;
  return Date.parse(at) <= Date.now() ? (
    <p>The old key has stopped working ({when}).</p>
  ) : (
    <p>The old key keeps working until {when}, then answers 401.</p>
  );
};

/** What the policy and credit forms accept, as PolicySchema and CreditBody do. */
const AMOUNT_RULE =
  "amounts as whole cents up to $1,000,000,000 (limits above 0), and up to 100 categories of up to 64 characters";

/**
 * A policy from form fields (empty = no limit), checked by the API's own PolicySchema: every
 * read of a stored policy parses it strictly, so a page must not store one the API would refuse.
 * Null when the form breaks a rule.
 */
function policyFromForm(body: Record<string, string | File>) {
  const categories = field(body, "allowedCategories")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const parsed = PolicySchema.safeParse({
    maxPerTransactionUsdCents: optionalCents(field(body, "maxPerTransactionUsdCents")),
    dailyLimitUsdCents: optionalCents(field(body, "dailyLimitUsdCents")),
    approvalThresholdUsdCents: optionalCents(field(body, "approvalThresholdUsdCents")),
    allowedCategories: categories.length > 0 ? categories : null,
  });
  return parsed.success ? normalizePolicy(parsed.data) : null;
}

type MerchantItem = ReturnType<typeof consoleMerchantView>;
type AgentItem = ReturnType<typeof agentView>;

const MerchantsPage = (props: { csrf: string; merchants: MerchantItem[] }) => (
  <>
    <form method="post" action="/console/ui/merchants" class="card">
      <Csrf token={props.csrf} />
      <h2>Register a merchant</h2>
      <label for="m-name">Name</label>
      <input id="m-name" name="name" required maxlength={200} />
      <label for="m-category">Category (optional)</label>
      <input id="m-category" name="category" maxlength={64} />
      <button type="submit">Register</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>Merchant</th>
            <th>Category</th>
            <th class="num">Balance</th>
            <th>Payout address</th>
            <th>Created</th>
            <th>API key</th>
          </tr>
        </thead>
        <tbody>
          {props.merchants.map((m) => (
            <tr id={`merchant-${m.id}`}>
              <td>
                {m.name}
                <br />
                <code>{m.id}</code>
              </td>
              <td>{m.category ?? "—"}</td>
              <td class="num">{usd(m.balanceMinor)}</td>
              <td class="mono">{m.payoutAddress ?? "—"}</td>
              <td>{m.createdAt.slice(0, 10)}</td>
              <td>
                <form
                  method="post"
                  action={`/console/ui/merchants/${m.id}/keys`}
                  class="roll-key"
                  onsubmit={`return confirm('Roll the API key of ${m.id}?')`}
                >
                  <Csrf token={props.csrf} />
                  <GraceSelect id={`grace-${m.id}`} />
                  <button type="submit" class="secondary">
                    Roll API key
                  </button>
                </form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);

const PolicyFields = (props: { policy?: AgentItem["policy"] }) => (
  <div class="row fields">
    <div>
      <label for="policy-maxPerTransactionUsdCents">Max per transaction (cents)</label>
      <input
        id="policy-maxPerTransactionUsdCents"
        name="maxPerTransactionUsdCents"
        inputmode="numeric"
        value={props.policy?.maxPerTransactionUsdCents?.toString() ?? ""}
      />
    </div>
    <div>
      <label for="policy-dailyLimitUsdCents">Daily limit (cents)</label>
      <input
        id="policy-dailyLimitUsdCents"
        name="dailyLimitUsdCents"
        inputmode="numeric"
        value={props.policy?.dailyLimitUsdCents?.toString() ?? ""}
      />
    </div>
    <div>
      <label for="policy-approvalThresholdUsdCents">Approval threshold (cents)</label>
      <input
        id="policy-approvalThresholdUsdCents"
        name="approvalThresholdUsdCents"
        inputmode="numeric"
        value={props.policy?.approvalThresholdUsdCents?.toString() ?? ""}
      />
    </div>
    <div>
      <label for="policy-allowedCategories">Allowed categories (comma-separated)</label>
      <input
        id="policy-allowedCategories"
        name="allowedCategories"
        value={props.policy?.allowedCategories?.join(", ") ?? ""}
      />
    </div>
  </div>
);

const AgentsPage = (props: { csrf: string; agents: AgentItem[] }) => (
  <>
    <form method="post" action="/console/ui/agents" class="card">
      <Csrf token={props.csrf} />
      <h2>Create an agent</h2>
      <label for="a-name">Name</label>
      <input id="a-name" name="name" required maxlength={200} />
      <PolicyFields />
      <label for="a-credit">Initial credit (cents, optional)</label>
      <input id="a-credit" name="credit" inputmode="numeric" />
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
              <td class="num">{usd(a.balanceMinor)}</td>
              <td class="muted">{policySummary(a.policy)}</td>
              <td>{a.createdAt.slice(0, 10)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);

const policySummary = (p: AgentItem["policy"]) =>
  [
    p.maxPerTransactionUsdCents !== null ? `≤ ${usd(p.maxPerTransactionUsdCents)} each` : null,
    p.dailyLimitUsdCents !== null ? `${usd(p.dailyLimitUsdCents)}/day` : null,
    p.approvalThresholdUsdCents !== null ? `approval over ${usd(p.approvalThresholdUsdCents)}` : null,
    p.allowedCategories?.length ? `only ${p.allowedCategories.join(", ")}` : null,
  ]
    .filter(Boolean)
    .join(" · ") || "no limits";

const AgentPage = (props: {
  csrf: string;
  agent: AgentItem;
  frozenAt: string | null;
  payments: ReturnType<typeof chargeView>[];
}) => (
  <>
    {props.agent.frozen ? <FrozenBanner csrf={props.csrf} agent={props.agent} frozenAt={props.frozenAt} /> : null}
    <div class="grid">
      <div class="stat">
        Balance<b id="agent-balance">{usd(props.agent.balanceMinor)}</b>
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
    <form method="post" action={`/console/ui/agents/${props.agent.agentId}/policy`} class="card">
      <Csrf token={props.csrf} />
      <h2>Policy</h2>
      <PolicyFields policy={props.agent.policy} />
      <button type="submit">Save policy</button>
    </form>
    <div class="cards">
      <form method="post" action={`/console/ui/agents/${props.agent.agentId}/credit`} class="card">
        <Csrf token={props.csrf} />
        <h2>Credit the wallet</h2>
        <label for="c-amount">Amount (cents)</label>
        <input id="c-amount" name="amount" inputmode="numeric" required />
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
    <h2>Recent payments</h2>
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
                <code>{p.chargeId}</code>
              </td>
              <td>
                <code>{p.merchantId}</code>
              </td>
              <td class="num">{usd(p.amountMinor)}</td>
              <td>{p.method}</td>
              <td class="mono">{p.reference}</td>
              <td>{p.paidAt}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
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

const ApprovalsPage = (props: { csrf: string; approvals: ReturnType<typeof approvalView>[] }) => (
  <div class="card">
    {props.approvals.length === 0 ? <p class="muted">Nothing is waiting for a human.</p> : null}
    <table>
      <thead>
        <tr>
          <th>Approval</th>
          <th class="num">Amount</th>
          <th>Agent</th>
          <th>Merchant</th>
          <th>Reason</th>
          <th>Expires</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        {props.approvals.map((a) => (
          <tr id={`approval-${a.approvalId}`}>
            <td>
              <code>{a.approvalId}</code>
              <br />
              <span class="muted">
                charge <code>{a.chargeId}</code>
              </span>
            </td>
            <td class="num">{usd(a.amountMinor)}</td>
            <td>
              <a href={`/console/ui/agents/${a.agentId}`}>
                <code>{a.agentId}</code>
              </a>
            </td>
            <td>
              <code>{a.merchantId}</code>
            </td>
            <td>{a.reason}</td>
            <td>{a.expiresAt}</td>
            <td>
              <form
                method="post"
                action={`/console/ui/approvals/${a.approvalId}/grant`}
                class="inline"
                onsubmit={`return confirm('Grant ${usd(a.amountMinor)} from ${a.agentId}?')`}
              >
                <Csrf token={props.csrf} />
                <button type="submit" name="grant">
                  Grant
                </button>
              </form>{" "}
              <form
                method="post"
                action={`/console/ui/approvals/${a.approvalId}/reject`}
                class="inline"
                onsubmit="return confirm('Reject this payment?')"
              >
                <Csrf token={props.csrf} />
                <button type="submit" class="danger" name="reject">
                  Reject
                </button>
              </form>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);

const WebhooksPage = (props: {
  csrf: string;
  endpoints: ReturnType<typeof endpointView>[];
  merchants: MerchantItem[];
}) => (
  <>
    <form method="post" action="/console/ui/webhooks" class="card">
      <Csrf token={props.csrf} />
      <h2>Add an endpoint</h2>
      <label for="w-url">URL</label>
      <input id="w-url" name="url" type="url" required />
      <span class="group-label">Events (none checked = all)</span>
      <div class="row">
        {EVENT_TYPES.map((e) => (
          <label>
            <input type="checkbox" name="events" value={e} /> {e}
          </label>
        ))}
      </div>
      <label for="w-merchant">Only this merchant's events (optional)</label>
      <select id="w-merchant" name="merchantId">
        <option value="">Every event of the service</option>
        {props.merchants.map((m) => (
          <option value={m.id}>
            {m.name} ({m.id})
          </option>
        ))}
      </select>
      <button type="submit">Add endpoint</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>Endpoint</th>
            <th>Events</th>
            <th>Merchant</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {props.endpoints.map((e) => (
            <tr>
              <td>
                <a href={`/console/ui/webhooks/${e.id}`}>{e.url}</a>
                <br />
                <code>{e.id}</code>
              </td>
              <td>{e.events.length ? e.events.join(", ") : "all"}</td>
              <td>{e.merchantId ?? "all"}</td>
              <td>{e.createdAt.slice(0, 10)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);

const DeliveriesPage = (props: { csrf: string; endpointId: string; deliveries: ReturnType<typeof deliveryView>[] }) => (
  <div class="card">
    {props.deliveries.length === 0 ? <p class="muted">No deliveries yet.</p> : null}
    <table>
      <thead>
        <tr>
          <th>Event</th>
          <th>Status</th>
          <th class="num">Attempts</th>
          <th>Last</th>
          <th>Next attempt</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        {props.deliveries.map((d) => (
          <tr class="delivery">
            <td>
              {d.type}
              <br />
              <code>{d.eventId}</code>
            </td>
            <td>
              <span class={`badge ${d.status === "delivered" ? "ok" : d.status === "failed" ? "bad" : "warn"}`}>
                {d.status}
              </span>
            </td>
            <td class="num">
              <a href={`/console/ui/webhooks/${props.endpointId}/deliveries/${d.id}`}>{d.attempts}</a>
            </td>
            <td>
              {d.lastStatusCode ?? ""} {d.lastError ?? ""}
            </td>
            <td>{d.nextAttemptAt ?? "—"}</td>
            <td>
              {d.status !== "pending" ? (
                <form
                  method="post"
                  action={`/console/ui/webhooks/${props.endpointId}/deliveries/${d.id}/redeliver`}
                  class="inline"
                >
                  <Csrf token={props.csrf} />
                  <button type="submit" class="secondary">
                    Redeliver
                  </button>
                </form>
              ) : null}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);

const KytForm = (props: { csrf: string }) => (
  <form method="post" action="/console/ui/kyt" class="card">
    <Csrf token={props.csrf} />
    <label for="k-address">Address</label>
    <input id="k-address" name="address" required placeholder="0x…" />
    <button type="submit">Screen</button>
  </form>
);

const UsersPage = (props: {
  csrf: string;
  configured: string[];
  added: { email: string; addedBy: string; createdAt: string }[];
}) => (
  <>
    <form method="post" action="/console/ui/users" class="card">
      <Csrf token={props.csrf} />
      <label for="u-email">Allow another e-mail to sign in</label>
      <input id="u-email" name="email" type="email" required />
      <button type="submit">Add user</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>E-mail</th>
            <th>Source</th>
          </tr>
        </thead>
        <tbody>
          {props.configured.map((e) => (
            <tr>
              <td>{e}</td>
              <td class="muted">CONSOLE_USERS</td>
            </tr>
          ))}
          {props.added.map((u) => (
            <tr>
              <td>{u.email}</td>
              <td class="muted">
                added by {u.addedBy} on {u.createdAt.slice(0, 10)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);

/** Token base units (6 decimals) as dollars, exactly: they are bigints. */
const usdOfUnits = (units: string) => {
  const cents = BigInt(units) / 10_000n;
  const rest = BigInt(units) % 10_000n;
  return `${usd(Number(cents))}${rest > 0n ? ` + ${rest} units` : ""}`;
};

function ReceivingPage(props: { report: ReceivingReport }) {
  const { report } = props;
  return (
    <>
      <p class="muted">
        Each charge and checkout link offered for x402 has a receiving address of its own, so an authorization pays only
        what it was made for. The service holds their keys; nothing moves these tokens yet.
      </p>
      <div class="grid">
        <div class="stat">
          Settled to receiving addresses<b id="receiving-total">{usdOfUnits(report.totals.receivedBaseUnits)}</b>
          <span class="muted">
            {report.totals.payments} payments, {report.totals.addresses} addresses
          </span>
        </div>
        <div class="stat">
          Chain read at block<b>{report.asOfBlock ?? "unavailable"}</b>
        </div>
      </div>
      <div class="card">
        <table id="receiving-table">
          <thead>
            <tr>
              <th>Address</th>
              <th>For</th>
              <th>Merchant</th>
              <th class="num">Payments</th>
              <th class="num">Settled</th>
              <th class="num">Held now</th>
              <th>Last payment</th>
            </tr>
          </thead>
          <tbody>
            {report.addresses.map((a) => (
              <tr>
                <td class="mono">{a.address}</td>
                <td>
                  {a.ownerKind === "charge" ? "charge" : "checkout link"}
                  <br />
                  <code>{a.ownerId}</code>
                </td>
                <td>
                  <code>{a.merchantId}</code>
                </td>
                <td class="num">{a.payments}</td>
                <td class="num">{usdOfUnits(a.receivedBaseUnits)}</td>
                <td
                  class={`num ${a.balanceBaseUnits !== null && a.balanceBaseUnits !== a.receivedBaseUnits ? "warn" : ""}`}
                >
                  {a.balanceBaseUnits === null ? "—" : usdOfUnits(a.balanceBaseUnits)}
                </td>
                <td>{a.lastPaymentAt}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {report.addresses.length === 0 ? <p class="muted">No x402 payment yet.</p> : null}
        {report.addresses.length === 200 ? (
          <p class="muted">The 200 most recently paid; the API lists the same.</p>
        ) : null}
      </div>
    </>
  );
}
