import { mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevServer, startDevServer } from "./dev-server";

// The API reference at /docs in real headless Chromium against `npm run dev`:
// it renders the document, and no request the page makes leaves 127.0.0.1
// (every other request is refused here and fails the test). A screenshot is
// written to test-results/docs-screenshots/ for a reviewer.

const ROOT = path.resolve(import.meta.dirname, "../..");
const SHOTS = path.join(ROOT, "test-results/docs-screenshots");

describe("the API reference page in a browser", () => {
  let dev: DevServer;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];
  const outside: string[] = [];
  const pageErrors: string[] = [];
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    rmSync(SHOTS, { recursive: true, force: true });
    mkdirSync(SHOTS, { recursive: true });
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
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    // Every request of the page passes here: loopback goes on, anything else is refused and remembered.
    await context.route("**/*", (route) => {
      const url = new URL(route.request().url());
      requested.push(url.href);
      if (url.protocol === "data:" || url.protocol === "blob:" || url.hostname === "127.0.0.1") return route.continue();
      outside.push(url.href);
      return route.abort("blockedbyclient");
    });
    page = await context.newPage();
    page.setDefaultTimeout(20_000);
    page.on("pageerror", (error) => pageErrors.push(error.message));
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    await dev?.stop();
  });

  it("npm run dev serves the committed document at /openapi.json", async () => {
    const res = await fetch(`${dev.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(JSON.parse(readFileSync(path.join(ROOT, "client/openapi.json"), "utf8")));
  });

  it("renders the reference from /openapi.json with its script from the same server, nothing from elsewhere", async () => {
    const response = await page.goto(`${dev.url}/docs`, { waitUntil: "load" });
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toContain("default-src 'self'");

    // The document's own words, rendered by Scalar.
    await page.getByRole("heading", { name: "agent-pay", exact: false }).first().waitFor();
    // The sidebar groups the interface's surface apart from what operations.md and the service add.
    for (const group of ["Interface", "Operations", "Service extras", "Console pages"])
      await page.getByText(group, { exact: true }).first().waitFor();
    await page.waitForLoadState("networkidle");
    await page.screenshot({ path: path.join(SHOTS, "01-docs.png") });

    // Open the Charges tag: its operations are there, and paying one documents the pendingApproval hold.
    await page.getByText("Charges", { exact: true }).first().click();
    await page.getByText("Pay a charge from the agent's wallet").first().waitFor();
    await page.getByText("Pay a charge from the agent's wallet").first().click();
    await page.getByText("402").first().waitFor();
    await page.waitForLoadState("networkidle");
    await page.screenshot({ path: path.join(SHOTS, "02-pay-charge.png") });

    expect(requested).toContain(`${dev.url}/standalone.js`);
    expect(requested).toContain(`${dev.url}/openapi.json`);
    expect(outside, "requests that left 127.0.0.1").toEqual([]);
    expect(pageErrors).toEqual([]);
    expect(
      consoleErrors.filter((text) => /Content Security Policy/i.test(text)),
      "CSP violations",
    ).toEqual([]);
  });
});
