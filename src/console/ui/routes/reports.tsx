import { Hono } from "hono";
import { z } from "zod";
import { csvExportResponse } from "../../../audit/csv";
import { ExportQuery, exportRange } from "../../../audit/routes";
import { firstAuditRows } from "../../../audit/service";
import { verifyEveryShard } from "../../../audit/verification";
import type { AppEnv } from "../../../auth/app-env";
import { placementOf } from "../../../ledger/place";
import { ApiError } from "../../../lib/errors";
import { issuesOf } from "../../../lib/validation";
import { receivingReport } from "../../../x402/receiving";
import { OverviewPage } from "../pages/overview";
import { ReceivingPage, X402NotConfigured } from "../pages/receiving";
import { TRANSACTIONS_SHOWN, TransactionsPage } from "../pages/transactions";
import { readOverviewOfShards } from "../queries";
import { render } from "../render";

/** What the console reads and never changes: the overview, the audited transactions (and their CSV), x402 receiving. */
export const reportRoutes = new Hono<AppEnv>()
  .get("/console/ui", async (c) => {
    const overview = await readOverviewOfShards(c.env);
    return render(c, "Overview", "/console/ui", <OverviewPage overview={overview} />);
  })
  .get("/console/ui/transactions", async (c) => {
    const query = z.object({ from: z.string().optional(), to: z.string().optional() }).parse(c.req.query());
    let range: ReturnType<typeof exportRange>;
    try {
      range = exportRange(query.from || undefined, query.to || undefined);
    } catch {
      range = exportRange(undefined, undefined);
    }
    const [rows, verdict] = await Promise.all([
      // Control's chain, the one the page has always shown.
      firstAuditRows({ DB: placementOf(c.env).control.db, ARCHIVE: c.env.ARCHIVE }, TRANSACTIONS_SHOWN, { range }),
      // Only the rows since the last verified point: this page is viewed often (GET /console/audit/verify?full=true checks all).
      verifyEveryShard(c.env, c.get("settings").proofs),
    ]);
    return render(
      c,
      "Transactions",
      "/console/ui/transactions",
      <TransactionsPage range={range} rows={rows} verdict={verdict} />,
    );
  })
  .get("/console/ui/receiving", async (c) => {
    const x = c.get("settings").x402;
    const body = x ? <ReceivingPage report={await receivingReport(c.env, x, 200)} /> : <X402NotConfigured />;
    return render(c, "Receiving addresses", "/console/ui/receiving", body);
  })
  .get("/console/ui/transactions.csv", (c) => {
    const query = ExportQuery.safeParse(c.req.query());
    if (!query.success) throw new ApiError(400, "invalid_request", { issues: issuesOf(query.error) });
    return csvExportResponse(c.env, exportRange(query.data.from, query.data.to));
  });
