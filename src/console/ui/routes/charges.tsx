import { Hono } from "hono";
import type { AppEnv } from "../../../auth/app-env";
import { type ChargeRow, chargeView } from "../../../charges/service";
import { ApiError } from "../../../lib/errors";
import { log } from "../../../lib/log";
import { RefundBody } from "../../../refunds/routes";
import { createRefund, listRefunds, sendRefund } from "../../../refunds/service";
import { field, form, optionalDollars } from "../forms";
import { usdOfBaseUnits } from "../layout";
import { ChargePage, refusalText } from "../pages/charge";
import { readChargeWithMerchant } from "../queries";
import { back, csrfOf, emailOf, render, type Ui } from "../render";

/** No charge has this id: a page that says so, with 404. */
const unknownCharge = (c: Ui, chargeId: string) => {
  c.status(404);
  return render(
    c,
    "Charge not found",
    "/console/ui/charges",
    <p class="card" id="charge-not-found">
      There is no charge <code>{chargeId}</code>. Check the id, or open the charge from the page that names it.
    </p>,
  );
};

/** One charge's page with its refunds; `error` and what was typed when a refund was refused. */
async function chargePage(
  c: Ui,
  found: { charge: ChargeRow; merchantName: string | null },
  extra: { error?: string; typed?: string } = {},
) {
  const { charge, merchantName } = found;
  const refunds = await listRefunds(c.env, charge.merchantId, charge.id);
  return render(
    c,
    `Charge ${charge.id}`,
    "/console/ui/charges",
    <ChargePage
      csrf={csrfOf(c)}
      charge={chargeView(charge)}
      merchantName={merchantName}
      refunds={refunds}
      typed={extra.typed}
    />,
    { error: extra.error },
  );
}

const AMOUNT_RULE = "Not refunded: enter dollars above $0 with at most two decimals, or leave the amount empty.";
const CHANGED =
  "Not refunded: this charge was refunded since the page was shown. Check its refunds below and try again.";

/**
 * A charge and its refunds for an operator, and refunding it: the operator acts as the charge's
 * merchant, through the same refunds service as POST /merchant/charges/:chargeId/refunds.
 */
export const chargePageRoutes = new Hono<AppEnv>()
  .get("/console/ui/charges/:chargeId", async (c) => {
    const chargeId = c.req.param("chargeId");
    const found = await readChargeWithMerchant(c.env, chargeId);
    return found ? chargePage(c, found) : unknownCharge(c, chargeId);
  })
  .post("/console/ui/charges/:chargeId/refunds", async (c) => {
    const chargeId = c.req.param("chargeId");
    const found = await readChargeWithMerchant(c.env, chargeId);
    if (!found) return unknownCharge(c, chargeId);
    const body = await form(c);
    const typed = field(body, "amount");
    const cents = optionalDollars(typed);
    const input = RefundBody.safeParse(cents === null ? {} : { amountUsdCents: cents });
    if (!input.success) return chargePage(c, found, { error: AMOUNT_RULE, typed });
    // The form carries the refunded sum it was shown with: a second submit of the same form refunds nothing more.
    const seen = field(body, "seenRefundedMinor");
    if (seen !== "" && seen !== String(found.charge.refundedMinor))
      return chargePage(c, found, { error: CHANGED, typed });

    const x = c.get("settings").x402;
    const { merchantId } = found.charge;
    let created: Awaited<ReturnType<typeof createRefund>>;
    try {
      const by = emailOf(c);
      created = await createRefund(c.env, x, merchantId, chargeId, input.data.amountUsdCents, undefined, by);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const now = (await readChargeWithMerchant(c.env, chargeId)) ?? found;
      const remaining = BigInt(now.charge.amountBaseUnits) - BigInt(now.charge.refundedBaseUnits);
      return chargePage(c, now, { error: refusalText(error.error, remaining), typed });
    }
    const { refund, charge } = created;
    const left = `${usdOfBaseUnits(BigInt(charge.amountBaseUnits) - BigInt(charge.refundedBaseUnits))} remains.`;
    if (refund.status === "pending" && x) {
      c.executionCtx.waitUntil(
        sendRefund(c.env, x, refund.refundId).catch((error) =>
          log.warn("refund_send", { refundId: refund.refundId, error }),
        ),
      );
      return back(
        c,
        ["charges", chargeId],
        `Refund ${refund.refundId} of ${usdOfBaseUnits(refund.amountBaseUnits)} is pending: it is being sent on chain to the address that paid. Reload this page to see its state. ${left}`,
      );
    }
    return back(
      c,
      ["charges", chargeId],
      `Refunded ${usdOfBaseUnits(refund.amountBaseUnits)} to the paying agent's wallet, as the merchant ${found.merchantName ?? merchantId} (${refund.refundId}). ${left}`,
    );
  });
