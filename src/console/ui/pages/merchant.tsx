import type { ChargeView } from "../../../charges/service";
import { usdOfBaseUnits, When } from "../layout";
import { ChargeLink } from "./charge";
import type { MerchantItem } from "./merchants";

/** One of the merchant's listed x402 resources, as the page shows it. */
export interface ListedResource {
  resource: string;
  type: string;
  listedAt: string;
  lastPaidAt: string;
}

/** A merchant's page in the console: its figures, its facilitator payments and its listed resources. */
export const MerchantPage = (props: {
  merchant: MerchantItem;
  payTo: string | null;
  payments: ChargeView[];
  payers: Map<string, string>;
  resources: ListedResource[];
}) => (
  <>
    <MerchantFigures merchant={props.merchant} payTo={props.payTo} />
    <h2>Facilitator payments</h2>
    <FacilitatorPayments payments={props.payments} payers={props.payers} />
    <h2>Listed resources</h2>
    <ListedResources resources={props.resources} />
  </>
);

/** Who the merchant is, its exact balance, and the address its own x402 routes are paid to. */
const MerchantFigures = (props: { merchant: MerchantItem; payTo: string | null }) => (
  <div class="cards">
    <div class="stat">
      Merchant<b id="merchant-name">{props.merchant.name}</b>
      <code>{props.merchant.id}</code>
    </div>
    <div class="stat">
      Category<b id="merchant-category">{props.merchant.category ?? "—"}</b>
    </div>
    <div class="stat">
      Balance<b id="merchant-balance">{usdOfBaseUnits(props.merchant.balanceBaseUnits)}</b>
    </div>
    <div class="stat">
      Facilitator payTo
      {props.payTo ? (
        <span class="mono" id="merchant-pay-to">
          {props.payTo}
        </span>
      ) : (
        <span class="muted" id="merchant-pay-to">
          Not assigned yet: the merchant's first ask for its facilitator settings assigns it.
        </span>
      )}
    </div>
  </div>
);

/** A hash or address in a cell: shortened on screen, whole on hover and when copied. */
const Short = (props: { value: string | null | undefined }) =>
  props.value ? (
    <code class="hash" title={props.value}>
      {props.value}
    </code>
  ) : (
    <span class="muted">-</span>
  );

/** Payments settled through the service as the merchant's facilitator, most recently paid first. */
const FacilitatorPayments = (props: { payments: ChargeView[]; payers: Map<string, string> }) =>
  props.payments.length === 0 ? (
    <p class="muted" id="payments-none">
      No payment settled through the service as this merchant's facilitator yet.
    </p>
  ) : (
    <div class="card">
      <table id="facilitator-payments">
        <thead>
          <tr>
            <th>Paid</th>
            <th>Resource</th>
            <th class="num">Amount</th>
            <th>Payer</th>
            <th>Transaction</th>
            <th>Charge</th>
          </tr>
        </thead>
        <tbody>
          {props.payments.map((p) => (
            <tr id={`payment-${p.chargeId}`}>
              <td>
                <When iso={p.paidAt} />
              </td>
              <td class="mono">{p.resource}</td>
              <td class="num">{usdOfBaseUnits(p.amountBaseUnits)}</td>
              <td>
                <Short value={props.payers.get(p.chargeId)} />
              </td>
              <td>
                <Short value={p.reference} />
              </td>
              <td>
                <ChargeLink chargeId={p.chargeId} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );

/** The merchant's resources on the public discovery list, most recently paid first. */
const ListedResources = (props: { resources: ListedResource[] }) =>
  props.resources.length === 0 ? (
    <p class="muted" id="resources-none">
      Nothing listed: a route is listed once a payment for it that declared discovery metadata settled here.
    </p>
  ) : (
    <div class="card">
      <table id="listed-resources">
        <thead>
          <tr>
            <th>Resource</th>
            <th>Type</th>
            <th>Listed</th>
            <th>Last paid</th>
          </tr>
        </thead>
        <tbody>
          {props.resources.map((r) => (
            <tr>
              <td class="mono">{r.resource}</td>
              <td>{r.type}</td>
              <td>
                <When iso={r.listedAt} />
              </td>
              <td>
                <When iso={r.lastPaidAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
