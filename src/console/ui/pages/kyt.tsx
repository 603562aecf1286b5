import type { KytResult } from "../../../kyt/screening";
import { Csrf } from "../layout";

/** The address to screen. */
export const KytForm = (props: { csrf: string }) => (
  <form method="post" action="/console/ui/kyt" class="card">
    <Csrf token={props.csrf} />
    <label for="k-address">Address</label>
    <input id="k-address" name="address" required placeholder="0x…" />
    <button type="submit">Screen</button>
  </form>
);

/** The verdict on one screened address. */
export const KytVerdict = (props: { address: string; result: KytResult }) => (
  <div class="card">
    <p class="mono">{props.address}</p>
    <p>
      Verdict:{" "}
      <span id="kyt-verdict" class={`badge ${props.result.verdict === "pass" ? "ok" : "bad"}`}>
        {props.result.verdict}
      </span>{" "}
      <span class="muted">{props.result.reason}</span>
    </p>
  </div>
);
