import { mkdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "./dev-server";

const SHOTS = path.resolve(import.meta.dirname, "../../test-results/console-screenshots");

// The web console driven in real headless Chromium against `npm run dev`.
describe("the console in a browser", () => {
  let dev: DevServer;
  let browser: Browser;
  let page: Page;
  let receiver: Server;
  const received: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        received.push(body);
        res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    dev = await startDevServer();
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    page = await browser.newPage({ acceptDownloads: true });
    page.on("dialog", (dialog) => void dialog.accept());
  });

  afterAll(async () => {
    await browser?.close();
    await dev?.stop();
    await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  });

  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  const api = async (method: string, route: string, token: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${route}`, { method, headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
    return { status: res.status, body: (await res.json()) as any };
  };
  const until = async (check: () => Promise<boolean>, what: string, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  it("signs in with the e-mailed code and runs the operator's day", async () => {
    // Sign in: the local mail transport prints the code to the server log.
    await page.goto(`${dev.url}/console`);
    await shot("sign-in");
    await page.fill("#email", "ops@example.com");
    await page.click("button[type=submit]");
    await page.waitForSelector("#code");
    await until(async () => /sign-in code is \d{6}/.test(dev.log()), "the sign-in code in the log");
    const code = [...dev.log().matchAll(/sign-in code is (\d{6})/g)].pop()![1]!;
    await page.fill("#code", code);
    await page.click("button[type=submit]");
    await page.waitForURL(`${dev.url}/console/ui`);
    await shot("overview");

    // Register a merchant: the key is shown once.
    await page.goto(`${dev.url}/console/ui/merchants`);
    await page.fill("#m-name", "Browser Shop");
    await page.click("form[action='/console/ui/merchants'] button[type=submit]");
    const merchantKey = (await page.textContent("#merchant-key"))!.trim();
    expect(merchantKey).toMatch(/^sk_mch_/);
    await shot("merchants");

    // Create an agent with an approval threshold and credit.
    await page.goto(`${dev.url}/console/ui/agents`);
    await page.fill("#a-name", "browser-agent");
    await page.fill("input[name=approvalThresholdUsdCents]", "1000");
    await page.fill("#a-credit", "5000");
    await page.click("form[action='/console/ui/agents'] button[type=submit]");
    const agentKey = (await page.textContent("#agent-key"))!.trim();
    expect(agentKey).toMatch(/^svc_sk_/);
    await shot("agents");

    // The agent hits the threshold through the API.
    const charge = (await api("POST", "/merchant/charges", merchantKey, { amountUsdCents: 2500, description: "big job" })).body;
    const held = await api("POST", `/charges/${charge.chargeId}/pay`, agentKey);
    expect(held.status).toBe(402);
    expect(held.body.pendingApproval).toBe(true);

    // Grant it in the console (a confirm dialog is accepted).
    await page.goto(`${dev.url}/console/ui/approvals`);
    await shot("approvals");
    await page.click(`#approval-${held.body.approvalId} button[name=grant]`);
    await page.waitForSelector(".notice");
    expect(await page.textContent(".notice")).toContain("is paid");
    const paid = await fetch(`${dev.url}/charges/${charge.chargeId}`).then((r) => r.json() as Promise<{ status: string; method: string }>);
    expect(paid).toMatchObject({ status: "paid", method: "ledger" });

    // Agent detail: balance after the payment.
    await page.goto(`${dev.url}/console/ui/agents`);
    await page.click("text=browser-agent");
    expect(await page.textContent("#agent-balance")).toBe("$25.00");
    await shot("agent-detail");

    // A webhook endpoint (secret shown once) and a delivery to it.
    const address = receiver.address();
    const hookUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/hook`;
    await page.goto(`${dev.url}/console/ui/webhooks`);
    await page.fill("#w-url", hookUrl);
    await page.click("form[action='/console/ui/webhooks'] button[type=submit]");
    expect((await page.textContent("#webhook-secret"))!.trim()).toMatch(/^whsec_/);
    await shot("webhooks");
    const another = (await api("POST", "/merchant/charges", merchantKey, { amountUsdCents: 100 })).body;
    await until(async () => received.some((b) => b.includes(another.chargeId)), "the webhook delivery");
    await page.click(`a:has-text("${hookUrl}")`);
    await until(async () => {
      await page.reload();
      return (await page.locator("tr.delivery").count()) > 0 && (await page.textContent("body"))!.includes("delivered");
    }, "the delivery in the list");
    await shot("deliveries");

    // KYT.
    await page.goto(`${dev.url}/console/ui/kyt`);
    await page.fill("#k-address", "0x098B716B8Aaf21512996dC57EB0615e2383E2f96");
    await page.click("form[action='/console/ui/kyt'] button[type=submit]");
    expect(await page.textContent("#kyt-verdict")).toBe("block");
    await shot("kyt");

    // Transactions: the chain is verified, and the CSV downloads.
    await page.goto(`${dev.url}/console/ui/transactions`);
    expect(await page.textContent("#chain-badge")).toContain("verified");
    await shot("transactions");
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#csv-download")]);
    const csv = readFileSync((await download.path())!, "utf8");
    expect(csv.split("\r\n")[0]).toBe("seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash");
    expect(csv).toContain(charge.chargeId);

    await page.goto(`${dev.url}/console/ui/users`);
    await shot("users");
    await page.goto(`${dev.url}/console/ui`);
    expect(await page.textContent(".stat b")).toBe("$25.00");
    await shot("overview-after");

    // Sign out: the console sends you back to sign in.
    await page.click("header button[type=submit]");
    await page.waitForURL(`${dev.url}/console/sign-in`);
    await page.goto(`${dev.url}/console/ui`);
    expect(page.url()).toBe(`${dev.url}/console/sign-in`);
  });
});
