import { Hono } from "hono";
import { outstandingAuthorizations } from "../../../agents/x402-life";
import type { AppEnv } from "../../../auth/app-env";
import type { X402Settings } from "../../../config/env";
import { nothingMore } from "../../../db/statements";
import { placementOf } from "../../../ledger/place";
import { log } from "../../../lib/log";
import { runTreasuryCheck } from "../../../treasury/check";
import { bookFunding, type FundingRefusal, listFundings } from "../../../treasury/fundings";
import { listCheckDetails } from "../../../treasury/history";
import { FundingBody } from "../../../treasury/routes";
import { field, form } from "../forms";
import { usdOfBaseUnits } from "../layout";
import { X402NotConfigured } from "../pages/receiving";
import { CHECKS_SHOWN, FUNDINGS_SHOWN, TreasuryPage } from "../pages/treasury";
import { back, csrfOf, emailOf, render, type Ui } from "../render";

/** A funding's refusal in plain words, its code in brackets. */
const REFUSED: Record<FundingRefusal, string> = {
  funding_already_booked: "That transaction is booked already (funding_already_booked).",
  no_funding_transfer:
    "That transaction moved none of the token to the settlement address, or the chain does not have it mined (no_funding_transfer).",
  funding_not_confirmed:
    "That transaction is mined but not yet as deep as a deposit must be: book it again shortly (funding_not_confirmed).",
  funding_already_counted:
    "That transaction is one of the service's own movements (a sweep, an x402 settlement or a deposit): the ledger counts it already (funding_already_counted).",
};

/** The treasury page, with an error and the typed transaction when a funding was refused. */
async function treasuryPage(c: Ui, x: X402Settings, refused?: { error: string; typed: string }) {
  const [checks, fundings, outstanding] = await Promise.all([
    listCheckDetails(placementOf(c.env).control.db, CHECKS_SHOWN),
    listFundings(placementOf(c.env).control.db, x, FUNDINGS_SHOWN),
    outstandingAuthorizations(c.env),
  ]);
  return render(
    c,
    "Treasury",
    "/console/ui/treasury",
    <TreasuryPage
      checks={checks}
      fundings={fundings}
      outstanding={outstanding}
      settlementAddress={x.payTo.toLowerCase()}
      csrf={csrfOf(c)}
      typed={refused?.typed}
    />,
    { error: refused?.error ?? null },
  );
}

/** The treasury page: the stored checks, a check on demand, and the operator's fundings. */
export const treasuryPageRoutes = new Hono<AppEnv>()
  .get("/console/ui/treasury", async (c) => {
    const x = c.get("settings").x402;
    if (!x) return render(c, "Treasury", "/console/ui/treasury", <X402NotConfigured />);
    return treasuryPage(c, x);
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
  })
  .post("/console/ui/treasury/fundings", async (c) => {
    const x = c.get("settings").x402;
    if (!x) return back(c, ["treasury"], "x402 is not configured on this deployment.");
    const typed = field(await form(c), "transaction");
    const input = FundingBody.safeParse({ transaction: typed });
    if (!input.success) return treasuryPage(c, x, { error: "Enter a transaction hash: 0x and 64 hex digits.", typed });
    const tx = input.data.transaction as `0x${string}`;
    let booked: Awaited<ReturnType<typeof bookFunding>>;
    try {
      booked = await bookFunding(c.env, x, tx, emailOf(c), nothingMore);
    } catch (error) {
      log.warn("treasury_funding", { error });
      return treasuryPage(c, x, {
        error: "The chain could not be read; nothing was booked. Try again shortly.",
        typed,
      });
    }
    if (!booked.ok) return treasuryPage(c, x, { error: REFUSED[booked.reason], typed });
    const { funding } = booked;
    return back(
      c,
      ["treasury"],
      `Booked ${usdOfBaseUnits(funding.amountBaseUnits)} from ${funding.transaction} as the operator's float.`,
    );
  });
