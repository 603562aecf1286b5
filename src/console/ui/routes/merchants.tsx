import { Hono } from "hono";
import type { AppEnv } from "../../../auth/app-env";
import { chargeView, listMerchantResourcePayments } from "../../../charges/service";
import { RollKeyBody, rollKey } from "../../../keys/roll";
import { placementOf } from "../../../ledger/place";
import { RegisterBody } from "../../../merchants/routes";
import {
  consoleMerchantView,
  getMerchant,
  homeBalance,
  listMerchantsAtHome,
  registerMerchant,
} from "../../../merchants/service";
import { merchantListings } from "../../../x402/discovery";
import { assignedPayTo, payersOfCharges } from "../../../x402/merchant-reads";
import { field, form, GRACE_RULE, graceFromForm } from "../forms";
import { ShownOnce } from "../layout";
import { OldKeyEnds } from "../pages/key-roll";
import { MerchantPage } from "../pages/merchant";
import { MerchantsPage } from "../pages/merchants";
import { back, csrfOf, emailOf, render, type Ui } from "../render";

/** The merchants the page lists. */
const merchantsOf = async (c: Ui) =>
  (await listMerchantsAtHome(c.env, placementOf(c.env).control.db, 200)).map(consoleMerchantView);

/** How many facilitator payments and listed resources a merchant's page shows. */
const PAGE_ROWS = 50;

/**
 * One merchant's page: its exact balance (from its home), its facilitator payTo, its facilitator
 * payments and their payers (where its charges live), and its listed resources. Only reads: a
 * merchant without a payTo yet is shown so, not given one.
 */
async function merchantPage(c: Ui, merchantId: string) {
  const merchant = await getMerchant(placementOf(c.env).control.db, merchantId);
  if (!merchant) return unknownMerchant(c, merchantId);
  const home = await placementOf(c.env).ofMerchant(merchant.id);
  const [balance, payTo, rows, listed] = await Promise.all([
    homeBalance(c.env, merchant),
    assignedPayTo(c.env, merchant.id),
    listMerchantResourcePayments(home.db, merchant.id, PAGE_ROWS),
    merchantListings(c.env, merchant.id, PAGE_ROWS),
  ]);
  const payers = await payersOfCharges(
    home.db,
    rows.map((r) => r.id),
  );
  return render(
    c,
    `Merchant ${merchant.name}`,
    "/console/ui/merchants",
    <MerchantPage
      merchant={consoleMerchantView({ ...merchant, ...balance })}
      payTo={payTo}
      payments={rows.map(chargeView)}
      payers={payers}
      resources={listed.resources}
    />,
  );
}

/** No merchant has this id: a page that says so, with 404. */
const unknownMerchant = (c: Ui, merchantId: string) => {
  c.status(404);
  return render(
    c,
    "Merchant not found",
    "/console/ui/merchants",
    <p class="card" id="merchant-not-found">
      There is no merchant <code>{merchantId}</code>. Check the id, or open the merchant from the{" "}
      <a href="/console/ui/merchants">merchants list</a>.
    </p>,
  );
};

/** Merchants: the list, one merchant's page, registering one, rolling one's API key. */
export const merchantRoutes = new Hono<AppEnv>()
  .get("/console/ui/merchants", async (c) => {
    const merchants = await merchantsOf(c);
    return render(c, "Merchants", "/console/ui/merchants", <MerchantsPage csrf={csrfOf(c)} merchants={merchants} />);
  })
  .get("/console/ui/merchants/:merchantId", (c) => merchantPage(c, c.req.param("merchantId")))
  .post("/console/ui/merchants", async (c) => {
    const body = await form(c);
    // The API's own rules (RegisterBody), so the page stores nothing the API would refuse.
    const input = RegisterBody.safeParse({ name: field(body, "name"), category: field(body, "category") || undefined });
    if (!input.success) {
      return render(
        c,
        "Merchants",
        "/console/ui/merchants",
        <MerchantsPage csrf={csrfOf(c)} merchants={await merchantsOf(c)} />,
        {
          error: "A merchant needs a name (up to 200 characters); a category is up to 64.",
        },
      );
    }
    const { name } = input.data;
    const created = await registerMerchant(c.env, placementOf(c.env).control.db, input.data);
    return render(
      c,
      "Merchants",
      "/console/ui/merchants",
      <>
        <ShownOnce label={`API key for ${name} (${created.merchantId})`} value={created.apiKey} id="merchant-key" />
        <MerchantsPage csrf={csrfOf(c)} merchants={await merchantsOf(c)} />
      </>,
      { notice: `Merchant ${created.merchantId} registered.` },
    );
  })

  // As POST /console/merchants/:merchantId/keys; the new key is shown on this answer only.
  .post("/console/ui/merchants/:merchantId/keys", async (c) => {
    const merchantId = c.req.param("merchantId");
    const input = RollKeyBody.safeParse(graceFromForm(await form(c)));
    if (!input.success) return back(c, ["merchants"], `Key not rolled: ${GRACE_RULE}.`);
    const merchant = await getMerchant(placementOf(c.env).control.db, merchantId);
    const rolled =
      merchant &&
      (await rollKey(c.env, { kind: "merchant", id: merchantId }, input.data.graceSeconds, emailOf(c), async () => []));
    if (!merchant || !rolled) return c.notFound();
    const merchants = await merchantsOf(c);
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
  });
