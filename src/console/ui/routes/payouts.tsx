import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../../../auth/app-env";
import { placementOf } from "../../../ledger/place";
import { merchantNames as readMerchantNames } from "../../../merchants/statements";
import { listPayouts, payoutView } from "../../../payouts/service";
import { PAYOUTS_SHOWN, PayoutsPage } from "../pages/payouts";
import { PAYOUT_STATUSES, readPayoutTotals } from "../queries";
import { render } from "../render";

const StatusQuery = z.object({ status: z.enum(PAYOUT_STATUSES) });

/** Every merchant's payouts for an operator: read only; merchants take payouts through the API. */
export const payoutPageRoutes = new Hono<AppEnv>().get("/console/ui/payouts", async (c) => {
  // An unknown status shows them all, as an unreadable date range shows the default one.
  const parsed = StatusQuery.safeParse(c.req.query());
  const status = parsed.success ? parsed.data.status : null;
  // One more than shown, to know whether there are more.
  const [rows, totals] = await Promise.all([
    listPayouts(c.env, { status: status ?? undefined, limit: PAYOUTS_SHOWN + 1 }),
    readPayoutTotals(c.env),
  ]);
  const payouts = rows.slice(0, PAYOUTS_SHOWN).map(payoutView);
  const merchantNames = await readMerchantNames(
    placementOf(c.env).control.db,
    payouts.map((p) => p.merchantId),
  );
  return render(
    c,
    "Payouts",
    "/console/ui/payouts",
    <PayoutsPage
      status={status}
      payouts={payouts}
      more={rows.length > PAYOUTS_SHOWN}
      merchantNames={merchantNames}
      totals={totals}
    />,
  );
});
