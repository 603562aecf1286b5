import type { ReceivingReport } from "../../../x402/receiving";
import { counted, usd, When } from "../layout";

/** Token base units (6 decimals) as dollars, exactly: they are bigints. */
const usdOfUnits = (units: string) => {
  const cents = BigInt(units) / 10_000n;
  const rest = BigInt(units) % 10_000n;
  return `${usd(Number(cents))}${rest > 0n ? ` + ${rest} units` : ""}`;
};

/** The x402 receiving addresses: what each was paid, and what it holds now. */
export function ReceivingPage(props: { report: ReceivingReport }) {
  const { report } = props;
  return (
    <>
      <p class="muted">
        Each charge and checkout link offered for x402 has a receiving address of its own, so an authorization pays only
        what it was made for. The service holds their keys; nothing moves these tokens yet.
      </p>
      <div class="grid">
        <div class="stat">
          Settled to receiving addresses<b id="receiving-total">{usdOfUnits(report.totals.receivedBaseUnits)}</b>
          <span class="muted">
            {counted(report.totals.payments, "payment")}, {counted(report.totals.addresses, "address", "addresses")}
          </span>
        </div>
        <div class="stat">
          Chain read at block<b>{report.asOfBlock ?? "unavailable"}</b>
        </div>
      </div>
      <div class="card">
        <table id="receiving-table">
          <thead>
            <tr>
              <th>Address</th>
              <th>For</th>
              <th>Merchant</th>
              <th class="num">Payments</th>
              <th class="num">Settled</th>
              <th class="num">Held now</th>
              <th>Last payment</th>
            </tr>
          </thead>
          <tbody>
            {report.addresses.map((a) => (
              <tr>
                <td class="mono">{a.address}</td>
                <td>
                  {a.ownerKind === "charge" ? "charge" : "checkout link"}
                  <br />
                  <code>{a.ownerId}</code>
                </td>
                <td>
                  <code>{a.merchantId}</code>
                </td>
                <td class="num">{a.payments}</td>
                <td class="num">{usdOfUnits(a.receivedBaseUnits)}</td>
                <td
                  class={`num ${a.balanceBaseUnits !== null && a.balanceBaseUnits !== a.receivedBaseUnits ? "warn" : ""}`}
                >
                  {a.balanceBaseUnits === null ? "—" : usdOfUnits(a.balanceBaseUnits)}
                </td>
                <td>
                  <When iso={a.lastPaymentAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {report.addresses.length === 0 ? <p class="muted">No x402 payment yet.</p> : null}
        {report.addresses.length === 200 ? (
          <p class="muted">The 200 most recently paid; the API lists the same.</p>
        ) : null}
      </div>
    </>
  );
}

/** The receiving page of a deployment without x402. */
export const X402NotConfigured = () => <p class="muted">x402 is not configured on this deployment.</p>;
