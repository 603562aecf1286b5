import { createHmac } from "node:crypto";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import path from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevServer, startDevServer } from "./dev-server";

// The web console in real headless Chromium against `npm run dev`, as an
// operator uses it. Full-page screenshots of every page visited are written to
// test-results/console-screenshots/ (git-ignored) for a reviewer to look at.
// The steps share one browser page and run in order.

const SHOTS = path.resolve(import.meta.dirname, "../../test-results/console-screenshots");
const CSV_HEADER =
  "seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash,amountBaseUnits";
const SANCTIONED = "0x098B716B8Aaf21512996dC57EB0615e2383E2f96"; // on the bundled OFAC SDN list
const CLEAN = "0x1111111111111111111111111111111111111111";

describe("the console in a browser", () => {
  let dev: DevServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let receiver: Server;
  let hookUrl: string;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  const dialogs: string[] = [];
  const pageErrors: string[] = [];
  let shots = 0;

  // What the steps hand on to each other.
  const state = {
    merchantKey: "",
    merchantId: "",
    agentKey: "",
    agentId: "",
    heldChargeId: "",
    approvalId: "",
    webhookSecret: "",
    endpointId: "",
    triggerChargeId: "",
  };

  beforeAll(async () => {
    rmSync(SHOTS, { recursive: true, force: true });
    mkdirSync(SHOTS, { recursive: true });
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
        res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const address = receiver.address();
    if (!address || typeof address === "string") throw new Error("the receiver did not bind");
    hookUrl = `http://127.0.0.1:${address.port}/hook`;

    [dev, browser] = await Promise.all([
      startDevServer(),
      chromium.launch({
        executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
        args: [
          "--no-sandbox",
          "--disable-gpu",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--no-first-run",
          "--disable-quic",
        ],
      }),
    ]);
    context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.setDefaultTimeout(10_000);
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    page.on("pageerror", (error) => pageErrors.push(error.message));
  });

  afterAll(async () => {
    await browser?.close();
    await dev?.stop();
    await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  });

  /** A full-page screenshot named by the page, numbered in the order visited. */
  const shot = (name: string) =>
    page.screenshot({ path: path.join(SHOTS, `${String(++shots).padStart(2, "0")}-${name}.png`), fullPage: true });
  const api = async (method: string, route: string, token?: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${route}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body ? { "content-type": "application/json" } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  /** Polls `check` until it holds; the deadline only bounds the wait. */
  const until = async (check: () => Promise<boolean>, what: string, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  const text = async (selector: string) => ((await page.textContent(selector)) ?? "").trim();
  /** One JSON-RPC call to the dev server's local chain. */
  const rpc = async (method: string, params: unknown[]) => {
    const res = await fetch(dev.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });
    return ((await res.json()) as { result: any }).result;
  };
  /**
   * The agent page's cards line up: the stats and the action cards are two grids with the same
   * columns, no card is wider than its column or leaves its grid, and every field stays inside its card.
   */
  const agentCardsFit = async () => {
    const grids = page.locator("main .cards");
    expect(await grids.count()).toBe(2);
    const lefts: number[][] = [];
    for (let g = 0; g < 2; g++) {
      const grid = grids.nth(g);
      const gridBox = (await grid.boundingBox())!;
      const column = Math.max(
        ...(
          await grid.evaluate((e: any) => e.ownerDocument.defaultView.getComputedStyle(e).gridTemplateColumns as string)
        )
          .split(" ")
          .map(Number.parseFloat),
      );
      const cards = grid.locator(":scope > *");
      const row: number[] = [];
      for (let i = 0; i < (await cards.count()); i++) {
        const box = (await cards.nth(i).boundingBox())!;
        expect(box.width, `card ${i} of grid ${g}`).toBeLessThanOrEqual(column + 0.5);
        expect(box.x).toBeGreaterThanOrEqual(gridBox.x - 0.5);
        expect(box.x + box.width).toBeLessThanOrEqual(gridBox.x + gridBox.width + 0.5);
        row.push(Math.round(box.x));
      }
      lefts.push(row);
    }
    expect(lefts[1], "the action cards under the stats' columns").toEqual(lefts[0]!.slice(0, lefts[1]!.length));
    const main = (await page.locator("main").boundingBox())!;
    for (const card of await page.locator("main form.card").all()) {
      const box = (await card.boundingBox())!;
      expect(box.x + box.width).toBeLessThanOrEqual(main.x + main.width + 0.5);
      for (const field of await card.locator("input:not([type=hidden]), select, button").all()) {
        const f = (await field.boundingBox())!;
        expect(f.x).toBeGreaterThanOrEqual(box.x);
        expect(f.x + f.width, `a field of ${await card.getAttribute("action")}`).toBeLessThanOrEqual(box.x + box.width);
      }
    }
  };

  it("signs in with the code the local mail transport printed to the server log", async () => {
    await page.goto(`${dev.url}/console`);
    expect(page.url()).toBe(`${dev.url}/console/sign-in`);
    expect(await text("h1")).toBe("Sign in");
    await shot("sign-in");

    await page.fill("#email", "ops@example.com");
    await page.click("button[type=submit]");
    await page.waitForSelector("#code");
    await shot("sign-in-code");
    await until(async () => /sign-in code is \d{6}/.test(dev.log()), "the sign-in code in the server log");
    const code = [...dev.log().matchAll(/to=ops@example\.com[\s\S]*?sign-in code is (\d{6})/g)].pop()![1]!;
    await page.fill("#code", code);
    await page.click("button[type=submit]");
    await page.waitForURL(`${dev.url}/console/ui`);
    expect(await text("h1")).toBe("Overview");
    expect(await text("header")).toContain("ops@example.com");

    // The browser holds the session in an HttpOnly, Secure, SameSite=Strict cookie, out of reach of scripts.
    const cookie = (await context.cookies()).find((c) => c.name === "console_session");
    expect(cookie).toMatchObject({ httpOnly: true, secure: true, sameSite: "Strict" });
    expect(await page.evaluate<string>("document.cookie")).not.toContain("console_session");
    await shot("overview");
  });

  it("registers a merchant; its API key is shown once", async () => {
    await page.goto(`${dev.url}/console/ui/merchants`);
    await page.fill("#m-name", "Browser Shop");
    await page.fill("#m-category", "data");
    await page.click("form[action='/console/ui/merchants'] button[type=submit]");
    state.merchantKey = await text("#merchant-key");
    expect(state.merchantKey).toMatch(/^sk_mch_[A-Za-z0-9_-]{43}$/);
    expect(await page.isVisible(".secret button:has-text('Copy')")).toBe(true);
    await shot("merchants-key-shown");

    const me = await api("GET", "/merchant/me", state.merchantKey);
    expect(me.status).toBe(200);
    expect(me.body.merchant.name).toBe("Browser Shop");
    state.merchantId = me.body.merchant.id;

    await page.goto(`${dev.url}/console/ui/merchants`);
    expect(await text("main table")).toContain("Browser Shop");
    expect(await page.content()).not.toContain(state.merchantKey);
    await shot("merchants");
  });

  it("creates an agent with an approval threshold and an initial credit; its key is shown once", async () => {
    await page.goto(`${dev.url}/console/ui/agents`);
    await page.fill("#a-name", "browser-agent");
    await page.fill("form[action='/console/ui/agents'] input[name=approvalThresholdUsd]", "10");
    await page.fill("#a-credit", "50.00");
    await page.click("form[action='/console/ui/agents'] button[type=submit]");
    state.agentKey = await text("#agent-key");
    expect(state.agentKey).toMatch(/^svc_sk_[A-Za-z0-9_-]{43}$/);
    expect(await text("main table")).toContain("approval over $10.00");
    await shot("agents-key-shown");

    const balance = await api("GET", "/balance", state.agentKey);
    expect(balance.status).toBe(200);
    expect(balance.body.balanceMinor).toBe(5000);
    state.agentId = balance.body.agentId;
  });

  it("a charge above the threshold, paid by the agent through the API, waits for approval", async () => {
    const charge = await api("POST", "/merchant/charges", state.merchantKey, {
      amountUsdCents: 2500,
      description: "big job",
    });
    expect(charge.status).toBe(201);
    state.heldChargeId = charge.body.chargeId;
    const held = await api("POST", `/charges/${state.heldChargeId}/pay`, state.agentKey);
    expect(held.status).toBe(402);
    expect(held.body.pendingApproval).toBe(true);
    state.approvalId = held.body.approvalId;
    expect(state.approvalId).toBeTruthy();
    expect((await api("GET", `/charges/${state.heldChargeId}`)).body.status).toBe("pending");
  });

  it("grants it on the approvals page after a confirmation, and the charge is paid", async () => {
    await page.goto(`${dev.url}/console/ui/approvals`);
    const row = page.locator(`#approval-${state.approvalId}`);
    expect(await row.textContent()).toContain("$25.00");
    expect(await row.textContent()).toContain(state.agentId);
    expect(await row.textContent()).toContain(state.merchantId);
    await shot("approvals");

    await row.locator("button[name=grant]").click();
    await page.waitForSelector(".notice");
    expect(dialogs.some((m) => m.includes("Grant $25.00"))).toBe(true);
    expect(await text(".notice")).toContain(`${state.heldChargeId} is paid`);
    expect(await page.locator(`#approval-${state.approvalId}`).count()).toBe(0);
    await shot("approvals-granted");

    const charge = await api("GET", `/charges/${state.heldChargeId}`);
    expect(charge.body).toMatchObject({ chargeId: state.heldChargeId, status: "paid", method: "ledger" });
    expect((await api("GET", "/balance", state.agentKey)).body.balanceMinor).toBe(2500);
  });

  it("the agent's page shows its balance and the payment", async () => {
    await page.goto(`${dev.url}/console/ui/agents`);
    await page.click("a:has-text('browser-agent')");
    await page.waitForURL(`${dev.url}/console/ui/agents/${state.agentId}`);
    expect(await text("#agent-balance")).toBe("$25.00");
    expect(await text("main")).toContain(state.heldChargeId);
    await agentCardsFit();
    // The policy's labels sit on one line, so its fields line up.
    const labels = await page.locator("form[action$='/policy'] label").all();
    const tops = new Set(await Promise.all(labels.map(async (l) => Math.round((await l.boundingBox())!.y))));
    expect(tops.size).toBe(1);
    await shot("agent-detail");
  });

  it("rolls the agent's key on its page after a confirmation: the new key is shown once, and the old one stops within 5 s", async () => {
    await page.goto(`${dev.url}/console/ui/agents/${state.agentId}`);
    expect(await page.inputValue("#k-grace")).toBe("86400");
    await page.selectOption("#k-grace", "0");
    await page.click("#roll-key");
    await page.waitForSelector("#agent-key");
    expect(dialogs.some((m) => m.includes(`Roll the API key of ${state.agentId}`))).toBe(true);
    const newKey = await text("#agent-key");
    expect(newKey).toMatch(/^svc_sk_[A-Za-z0-9_-]{43}$/);
    expect(newKey).not.toBe(state.agentKey);
    expect((await page.content()).split(newKey)).toHaveLength(2);
    expect(await text(".secret")).toContain("The old key has stopped working");
    expect(await text("#old-key-expires")).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    await shot("agent-key-rolled");

    await until(
      async () => (await api("GET", "/balance", state.agentKey)).status === 401,
      "the old key answering 401",
      5_000,
    );
    expect((await api("GET", "/balance", newKey)).body.balanceMinor).toBe(2500);
    state.agentKey = newKey;
    await page.goto(`${dev.url}/console/ui/agents/${state.agentId}`);
    expect(await page.content()).not.toContain(newKey);
  });

  it("freezes the agent with a reason: a plain banner on its page and a badge in the list, its payments refused; then unfreezes it", async () => {
    await page.fill("#f-reason", "spending looks wrong");
    await page.click("#freeze");
    await page.waitForSelector("#frozen-banner");
    expect(await text(".notice")).toContain("Frozen");
    expect(await text("#frozen-banner")).toContain("FROZEN");
    expect(await text("#frozen-reason")).toBe("spending looks wrong");
    expect(await text("#agent-status")).toBe("Frozen");
    // Plain at a glance: the banner is the first thing under the title, inside the first screen.
    const banner = (await page.locator("#frozen-banner").boundingBox())!;
    expect(banner.y + banner.height).toBeLessThan(400);
    expect(await page.locator("#freeze").count()).toBe(0);
    await shot("agent-frozen");

    const charge = await api("POST", "/merchant/charges", state.merchantKey, {
      amountUsdCents: 100,
      description: "while frozen",
    });
    const refused = await api("POST", `/charges/${charge.body.chargeId}/pay`, state.agentKey);
    expect(refused).toEqual({ status: 403, body: { error: "agent_frozen" } });

    await page.goto(`${dev.url}/console/ui/agents`);
    const row = page.locator("tr", { has: page.locator(`a[href='/console/ui/agents/${state.agentId}']`) });
    expect(await row.locator(".badge.frozen").textContent()).toBe("frozen");
    expect(await row.locator(".badge.frozen").isVisible()).toBe(true);
    await shot("agents-frozen-badge");

    await page.goto(`${dev.url}/console/ui/agents/${state.agentId}`);
    await page.click("#unfreeze");
    await page.waitForSelector(".notice");
    expect(await text(".notice")).toContain("Unfrozen");
    expect(await page.locator("#frozen-banner").count()).toBe(0);
    expect(await text("#agent-status")).toBe("Active");
    expect((await api("GET", "/balance", state.agentKey)).body.frozen).toBe(false);
    await page.goto(`${dev.url}/console/ui/agents`);
    expect(await page.locator(".badge.frozen").count()).toBe(0);
  });

  it("creates a webhook endpoint (secret shown once) and sees a signed delivery arrive and listed", async () => {
    await page.goto(`${dev.url}/console/ui/webhooks`);
    await page.fill("#w-url", hookUrl);
    await page.click("form[action='/console/ui/webhooks'] button[type=submit]");
    state.webhookSecret = await text("#webhook-secret");
    expect(state.webhookSecret).toMatch(/^whsec_/);
    await shot("webhooks-secret-shown");

    // An event: another charge created through the API.
    const trigger = await api("POST", "/merchant/charges", state.merchantKey, {
      amountUsdCents: 100,
      description: "webhook trigger",
    });
    expect(trigger.status).toBe(201);
    state.triggerChargeId = trigger.body.chargeId;
    await until(
      async () => received.some((r) => r.body.includes(state.triggerChargeId)),
      "the webhook at the receiver",
    );
    const delivery = received.find((r) => r.body.includes(state.triggerChargeId))!;
    expect(delivery.headers["x-service-event"]).toBe("charge.created");
    // Signed with the secret the console showed.
    const signature = String(delivery.headers["x-service-signature"]);
    const t = /t=(\d+)/.exec(signature)?.[1];
    expect(t).toBeDefined();
    const expected = createHmac("sha256", state.webhookSecret).update(`${t}.${delivery.body}`).digest("hex");
    expect(signature.split(",")).toContain(`v1=${expected}`);

    await page.goto(`${dev.url}/console/ui/webhooks`);
    expect(await page.content()).not.toContain(state.webhookSecret);
    await shot("webhooks");
    await page.click(`a:has-text("${hookUrl}")`);
    // The link's navigation must finish before the page is reloaded, or the reload races it.
    await page.waitForURL(/\/console\/ui\/webhooks\/wh_[^/]+$/);
    await until(async () => {
      await page.reload();
      const rows = page.locator("tr.delivery", { hasText: "charge.created" });
      return (await rows.count()) > 0 && ((await rows.first().textContent()) ?? "").includes("delivered");
    }, "the delivery listed as delivered");
    const row = page.locator("tr.delivery", { hasText: "charge.created" }).first();
    expect(await row.locator(".badge").textContent()).toBe("delivered");
    expect(Number(await row.locator("td.num").textContent())).toBeGreaterThanOrEqual(1);
    await shot("webhook-deliveries");
  });

  it("screens addresses on the KYT page", async () => {
    await page.goto(`${dev.url}/console/ui/kyt`);
    await page.fill("#k-address", SANCTIONED);
    await page.click("form[action='/console/ui/kyt'] button[type=submit]");
    expect(await text("#kyt-verdict")).toBe("block");
    await shot("kyt-block");
    await page.fill("#k-address", CLEAN);
    await page.click("form[action='/console/ui/kyt'] button[type=submit]");
    expect(await text("#kyt-verdict")).toBe("pass");
    await shot("kyt-pass");
  });

  it("shows the transactions with a chain-verified badge, and downloads the CSV", async () => {
    await page.goto(`${dev.url}/console/ui/transactions`);
    expect(await text("#chain-badge")).toMatch(/^verified · \d+ events$/);
    expect(await page.getAttribute("#chain-badge", "class")).toContain("ok");
    expect(await text("main table")).toContain("$25.00");
    await shot("transactions");

    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#csv-download")]);
    expect(download.suggestedFilename()).toMatch(/\.csv$/);
    const csv = readFileSync((await download.path())!, "utf8");
    const lines = csv.trim().split(/\r?\n/);
    expect(lines[0]).toBe(CSV_HEADER);
    // The credit and the granted payment.
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(csv).toContain(state.heldChargeId);
  });

  it("shows the console users and an overview with today's paid volume", async () => {
    await page.goto(`${dev.url}/console/ui/users`);
    expect(await text("main table")).toContain("ops@example.com");
    await shot("users");

    await page.goto(`${dev.url}/console/ui`);
    expect(await text(".stat b")).toBe("$25.00");
    expect(await page.locator("main svg rect[height]:not([height='0'])").count()).toBeGreaterThanOrEqual(1);
    await shot("overview-after");
  });

  it("pays the merchant out through the API; the Payouts page shows it paid, with its transaction", async () => {
    const address = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api("PUT", "/merchant/payout-address", state.merchantKey, { address })).status).toBe(200);
    const made = await api("POST", "/merchant/payouts", state.merchantKey, { amountUsdCents: 1000 });
    expect(made.status).toBe(201);
    expect(made.body.balanceMinor).toBe(1500);
    const payoutId: string = made.body.payout.payoutId;
    let payout: any;
    await until(
      async () => {
        payout = (await api("GET", `/merchant/payouts/${payoutId}`, state.merchantKey)).body.payout;
        return payout.status !== "pending";
      },
      "the payout decided",
      30_000,
    );
    expect(payout.status).toBe("paid");
    expect((await rpc("eth_getTransactionReceipt", [payout.transaction])).status).toBe("0x1");

    await page.click("header a:has-text('Payouts')");
    await page.waitForURL(`${dev.url}/console/ui/payouts`);
    const row = page.locator(`#payout-${payoutId}`);
    expect(await row.locator(".badge").textContent()).toBe("paid");
    expect(await row.locator("td.num").textContent()).toBe("$10.00");
    expect(await row.textContent()).toContain("Browser Shop");
    expect(await row.textContent()).toContain(address.toLowerCase());
    expect(await row.locator("code.hash").textContent()).toBe(payout.transaction);
    expect(await row.locator("code.hash").getAttribute("title")).toBe(payout.transaction);
    expect(await row.locator("time").first().getAttribute("datetime")).toBe(payout.createdAt);
    expect(await text("#payout-total-paid b")).toBe("$10.00");
    expect(await text("#payout-total-paid .muted")).toBe("1 payout");
    await shot("payouts");

    await page.click("nav.filters a:has-text('failed')");
    await page.waitForURL(`${dev.url}/console/ui/payouts?status=failed`);
    expect(await page.locator(`#payout-${payoutId}`).count()).toBe(0);
    expect(await text("main .card p.muted")).toBe("No failed payouts.");
    expect(await page.getAttribute("nav.filters a.on", "aria-current")).toBe("page");
  });

  it("checks the treasury now: the Treasury page shows the check, holdings against the ledger as a chart, and the history", async () => {
    await page.click("header a:has-text('Treasury')");
    await page.waitForURL(`${dev.url}/console/ui/treasury`);
    await page.click("#treasury-check-now");
    await page.waitForSelector(".notice");
    // The development chain minted the settlement address a float, which `npm run dev` booked as the
    // operator's: the payout above left from it, and the treasury is balanced, with no banner.
    expect(await text(".notice")).toMatch(/^Checked at block \d+: balanced\.$/);
    expect(await text("#treasury-float b")).toBe("$100,000.00");
    expect(await page.locator("#treasury-fundings-list tbody tr").count()).toBe(1);
    expect(await page.locator("#treasury-shortfall").count()).toBe(0);
    // The page's figures are the stored check's, which the API lists with the same session token.
    const token = (await context.cookies()).find((c) => c.name === "console_session")!.value;
    // The dev cron checks every 10 s too: the page shows one of the latest few.
    const { checks } = (await api("GET", "/console/treasury/checks?limit=5", token)).body;
    expect(checks[0].status).toBe("balanced");
    const dollars = (units: string) =>
      `$${(BigInt(units) / 1_000_000n).toLocaleString("en-US")}.${(BigInt(units) % 1_000_000n)
        .toString()
        .padStart(6, "0")
        .replace(/0{1,4}$/, "")}`;
    expect(checks.map((c: { totalBaseUnits: string }) => dollars(c.totalBaseUnits))).toContain(
      await text("#treasury-total b"),
    );
    expect(await page.locator("#treasury-chart polyline").count()).toBe(2);
    expect(await page.locator("#treasury-chart .y-label").count()).toBeGreaterThanOrEqual(2);
    expect(await text("#treasury-chart .y-label")).toMatch(/^-?\$[\d,]+\.\d\d$/);
    expect(await page.locator("#treasury-checks tbody tr").count()).toBeGreaterThanOrEqual(1);
    expect(await text("#treasury-checks tbody tr .badge")).toBe("balanced");
    await shot("treasury");
  });

  it("opens the paid charge from the agent page, refunds part of it after a confirmation, and sees the refund listed", async () => {
    const chargeId = state.heldChargeId;
    await page.goto(`${dev.url}/console/ui/agents/${state.agentId}`);
    await page.click(`main table a:has-text('${chargeId}')`);
    await page.waitForURL(`${dev.url}/console/ui/charges/${chargeId}`);
    expect(await text("#charge-amount")).toBe("$25.00");
    expect(await text("#charge-status")).toBe("paid");
    expect(await text("#charge-refunded")).toBe("$0.00");
    expect(await text("#charge-details")).toContain("Browser Shop");
    expect(await text("#charge-details")).toContain(state.agentId);
    expect(await page.locator("#refunds-table tbody tr").count()).toBe(0);
    expect(await text("label[for=r-amount]")).toBe("Amount ($, optional)");

    await page.fill("#r-amount", "5");
    const asked = dialogs.length;
    await page.click("#refund");
    await page.waitForSelector(".notice");
    expect(dialogs.slice(asked)).toEqual([`Refund $5 of ${chargeId} as merchant Browser Shop?`]);
    expect(await text(".notice")).toContain(
      "Refunded $5.00 to the paying agent's wallet, as the merchant Browser Shop",
    );

    const { refunds } = (await api("GET", `/merchant/charges/${chargeId}/refunds`, state.merchantKey)).body;
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ amountMinor: 500, status: "succeeded", method: "ledger" });
    const charge = (await api("GET", `/charges/${chargeId}`)).body;
    expect(charge.refundedMinor).toBe(500);
    expect(await text("#charge-refunded")).toBe(`$${(charge.refundedMinor / 100).toFixed(2)}`);
    expect(await text("#charge-remaining")).toBe("$20.00");
    const row = page.locator(`#refund-${refunds[0].refundId}`);
    expect(await row.locator("td.num").textContent()).toBe("$5.00");
    expect(await row.locator(".badge").textContent()).toBe("succeeded");
    expect(await row.locator("time").getAttribute("datetime")).toBe(refunds[0].createdAt);
    expect((await api("GET", "/balance", state.agentKey)).body.balanceMinor).toBe(3000);
    expect((await api("GET", "/merchant/me", state.merchantKey)).body.merchant.balanceMinor).toBe(1000);
    await shot("charge");
  });

  it("is usable on a phone-sized screen: no page is wider than the screen", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [route, name] of [
      ["/console/ui", "overview"],
      ["/console/ui/agents", "agents"],
      ["/console/ui/transactions", "transactions"],
      ["/console/ui/payouts", "payouts"],
      ["/console/ui/treasury", "treasury"],
      [`/console/ui/charges/${state.heldChargeId}`, "charge"],
      [`/console/ui/agents/${state.agentId}`, "agent"],
    ] as const) {
      await page.goto(`${dev.url}${route}`);
      await shot(`phone-${name}`);
      const { scrollWidth, innerWidth } = await page.evaluate<{ scrollWidth: number; innerWidth: number }>(
        "({ scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth })",
      );
      expect(scrollWidth, route).toBeLessThanOrEqual(innerWidth);
      if (name === "agent") await agentCardsFit();
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("shows times in the viewer's zone, with the UTC value on hover", async () => {
    // A viewer in Tokyo (UTC+9), signed in with the same session.
    const tokyo = await browser.newContext({ timezoneId: "Asia/Tokyo", locale: "en-US" });
    await tokyo.addCookies(await context.cookies());
    const there = await tokyo.newPage();
    try {
      await there.goto(`${dev.url}/console/ui/agents/${state.agentId}`);
      const paid = there.locator("table time[data-local=datetime]").first();
      const iso = (await paid.getAttribute("datetime"))!;
      expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
      const shown = ((await paid.textContent()) ?? "").replace(/\s+/g, " ");
      const local = new Date(iso)
        .toLocaleString("en-US", { timeZone: "Asia/Tokyo", dateStyle: "medium", timeStyle: "short" })
        .replace(/\s+/g, " ");
      expect(shown).toBe(local);
      expect(await paid.getAttribute("title")).toBe(`${iso.slice(0, 19).replace("T", " ")} UTC`);
      await there.screenshot({
        path: path.join(SHOTS, `${String(++shots).padStart(2, "0")}-agent-tokyo.png`),
        fullPage: true,
      });
    } finally {
      await tokyo.close();
    }
  });

  it("signs out: the console sends you back to sign in", async () => {
    await page.goto(`${dev.url}/console/ui`);
    await page.click("header button[type=submit]");
    await page.waitForURL(`${dev.url}/console/sign-in`);
    expect((await context.cookies()).find((c) => c.name === "console_session")).toBeUndefined();
    await page.goto(`${dev.url}/console/ui/merchants`);
    expect(page.url()).toBe(`${dev.url}/console/sign-in`);
    await shot("signed-out");
    expect(pageErrors).toEqual([]);
  });
});
