import type { consoleMerchantView } from "../../../merchants/service";
import { Csrf, usdOfBaseUnits, When } from "../layout";
import { GraceSelect } from "./key-roll";

export type MerchantItem = ReturnType<typeof consoleMerchantView>;

/** The merchant list, each with its key roll form, and the form that registers one. */
export const MerchantsPage = (props: { csrf: string; merchants: MerchantItem[] }) => (
  <>
    <form method="post" action="/console/ui/merchants" class="card">
      <Csrf token={props.csrf} />
      <h2>Register a merchant</h2>
      <label for="m-name">Name</label>
      <input id="m-name" name="name" required maxlength={200} />
      <label for="m-category">Category (optional)</label>
      <input id="m-category" name="category" maxlength={64} />
      <button type="submit">Register</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>Merchant</th>
            <th>Category</th>
            <th class="num">Balance</th>
            <th>Payout address</th>
            <th>Created</th>
            <th>API key</th>
          </tr>
        </thead>
        <tbody>
          {props.merchants.map((m) => (
            <tr id={`merchant-${m.id}`}>
              <td>
                <a href={`/console/ui/merchants/${encodeURIComponent(m.id)}`}>{m.name}</a>
                <br />
                <code>{m.id}</code>
              </td>
              <td>{m.category ?? "—"}</td>
              <td class="num">{usdOfBaseUnits(m.balanceBaseUnits)}</td>
              <td class="mono">{m.payoutAddress ?? "—"}</td>
              <td>
                <When iso={m.createdAt} dateOnly />
              </td>
              <td>
                <form
                  method="post"
                  action={`/console/ui/merchants/${m.id}/keys`}
                  class="roll-key"
                  onsubmit={`return confirm('Roll the API key of ${m.id}?')`}
                >
                  <Csrf token={props.csrf} />
                  <GraceSelect id={`grace-${m.id}`} />
                  <button type="submit" class="secondary">
                    Roll API key
                  </button>
                </form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);
