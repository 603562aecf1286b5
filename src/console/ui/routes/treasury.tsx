import { Hono } from "hono";
import type { AppEnv } from "../../../app-env";
import { log } from "../../../lib/log";
import { runTreasuryCheck } from "../../../treasury/check";
import { listCheckDetails } from "../../../treasury/history";
import { X402NotConfigured } from "../pages/receiving";
import { CHECKS_SHOWN, TreasuryPage } from "../pages/treasury";
import { back, csrfOf, render } from "../render";

/** The treasury page: the stored checks, and a check on demand. */
export const treasuryPageRoutes = new Hono<AppEnv>()
  .get("/console/ui/treasury", async (c) => {
    const x = c.get("settings").x402;
    if (!x) return render(c, "Treasury", "/console/ui/treasury", <X402NotConfigured />);
    const checks = await listCheckDetails(c.env.DB, CHECKS_SHOWN);
    return render(
      c,
      "Treasury",
      "/console/ui/treasury",
      <TreasuryPage checks={checks} settlementAddress={x.payTo.toLowerCase()} csrf={csrfOf(c)} />,
    );
  })
  .post("/console/ui/treasury/check", async (c) => {
    const x = c.get("settings").x402;
    if (!x) return back(c, ["treasury"], "x402 is not configured on this deployment.");
    try {
      const check = await runTreasuryCheck(c.env, x);
      return back(c, ["treasury"], `Checked at block ${check.holdings.asOfBlock}: ${check.status}.`);
    } catch (error) {
      log.warn("treasury_check", { error });
      return back(c, ["treasury"], "The chain could not be read; nothing was stored. Try again shortly.");
    }
  });
