import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import { dollarsOfBaseUnits } from "../../lib/money";

// Rendered raw: as a child string it is HTML-escaped, and `.row>*` became `.row&gt;*`, a rule the browser dropped.
// `.cards` fills its columns (auto-fill), so its rows line up even when one has fewer cards, and `.cards>*{min-width:0}`
// keeps each card inside its column: a grid item is otherwise at least as wide as its content.
// `h1` breaks a long id (a charge's page title) rather than widen a phone's page.
const STYLE = `
:root{--ink:#17202a;--muted:#5d6d7e;--line:#e5e8ec;--bg:#f7f8fa;--accent:#1f6feb;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}body{margin:0;font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--ink);background:var(--bg)}
header{background:#0d1117;color:#fff;padding:.6rem 1rem;display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
header a{color:#c9d1d9;text-decoration:none;font-size:.95rem}header a.on,header a:hover{color:#fff}header strong{margin-right:.5rem}
header form{margin-left:auto}main{max-width:1100px;margin:0 auto;padding:1rem}
h1{font-size:1.35rem;margin:.5rem 0 1rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:1rem;margin-bottom:1rem;overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9rem}th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em;word-break:break-all}
form.inline{display:inline}label,.group-label{display:block;margin:.4rem 0 .15rem;color:var(--muted);font-size:.85rem}
input,select{font:inherit;padding:.4rem .5rem;border:1px solid #c8ccd1;border-radius:6px;width:100%;max-width:420px}
input[type=checkbox]{width:auto}button{font:inherit;padding:.4rem .9rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer;margin-top:.5rem}
form.card>button{display:block}button.secondary{background:#fff;color:var(--accent)}button.danger{background:var(--bad);border-color:var(--bad)}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:.75rem}
.stat{background:#fff;border:1px solid var(--line);border-radius:8px;padding:.75rem}.stat b{display:block;font-size:1.4rem}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:999px;font-size:.8rem;border:1px solid currentColor}
.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}.muted{color:var(--muted)}
.notice{background:#ddf4ff;border:1px solid #54aeff;padding:.6rem .8rem;border-radius:6px;margin-bottom:1rem}
.error{background:#ffebe9;border:1px solid #ff818266;padding:.6rem .8rem;border-radius:6px;margin-bottom:1rem}
.secret{background:#fff8c5;border:1px solid #d4a72c;padding:.75rem;border-radius:6px;margin-bottom:1rem}
.row{display:flex;gap:1rem;flex-wrap:wrap}.row>*{flex:1 1 200px}
.fields{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:0 1rem}.fields>*{min-width:0}.fields input{max-width:none}
.hint{display:block;margin-top:.15rem;color:var(--muted);font-size:.8rem}
.card h2{margin-top:0}.grid{margin-bottom:1rem}.stat>span{display:block}.stat .mono{font-size:.8em}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:1rem;margin-bottom:1rem}.cards>*{min-width:0}
.cards>.card{margin:0;display:flex;flex-direction:column}.cards input,.cards select{max-width:none}.cards .actions{margin-top:auto;padding-top:.5rem}.cards .actions button{margin-top:0}
.frozen-banner{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;background:#ffebe9;border:2px solid var(--bad);border-left-width:8px;border-radius:8px;padding:.75rem 1rem;margin-bottom:1rem}
.frozen-banner strong{color:var(--bad);font-size:1.15rem;letter-spacing:.02em}.frozen-banner form{margin-left:auto}.frozen-banner button{margin-top:0}
.badge.frozen{background:var(--bad);border-color:var(--bad);color:#fff;font-weight:600;margin-left:.35rem}tr.frozen td{background:#fff5f5}
nav.filters{display:flex;gap:.4rem;flex-wrap:wrap;margin-bottom:.75rem}nav.filters a{padding:.2rem .7rem;border:1px solid var(--line);border-radius:999px;background:#fff;color:var(--accent);text-decoration:none}
nav.filters a.on{background:var(--accent);border-color:var(--accent);color:#fff}caption{text-align:left;padding-bottom:.4rem}
code.hash{display:inline-block;max-width:10em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom;word-break:normal}td .reason{font-size:.85rem;margin-top:.2rem;max-width:16em}
form.roll-key{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center}form.roll-key select{width:auto}form.roll-key button{margin-top:0}
h1{overflow-wrap:anywhere}table.details th{width:11em}
.shortfall-banner{background:#ffebe9;border:2px solid var(--bad);border-left-width:8px;border-radius:8px;padding:.75rem 1rem;margin-bottom:1rem}.shortfall-banner strong{color:var(--bad)}
@media (max-width:600px){header{gap:.6rem}main{padding:.6rem}th,td{padding:.3rem}}
`;

const NAV = [
  ["/console/ui", "Overview"],
  ["/console/ui/merchants", "Merchants"],
  ["/console/ui/agents", "Agents"],
  ["/console/ui/approvals", "Approvals"],
  ["/console/ui/webhooks", "Webhooks"],
  ["/console/ui/kyt", "KYT"],
  ["/console/ui/transactions", "Transactions"],
  ["/console/ui/payouts", "Payouts"],
  ["/console/ui/receiving", "Receiving"],
  ["/console/ui/treasury", "Treasury"],
  ["/console/ui/users", "Users"],
] as const;

export function Page(props: {
  title: string;
  path?: string;
  email?: string;
  csrf?: string;
  notice?: string | null;
  error?: string | null;
  /** The latest treasury check, when it found a shortfall: shown on every page until a check no longer does. */
  shortfall?: TreasuryShortfall | null;
  children?: Child;
}) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · agent-pay console`}</title>
        <style>{raw(STYLE)}</style>
      </head>
      <body>
        <header>
          <strong>agent-pay</strong>
          {props.email
            ? NAV.map(([href, label]) => (
                <a href={href} class={props.path === href ? "on" : ""}>
                  {label}
                </a>
              ))
            : null}
          {props.email ? (
            <form method="post" action="/console/sign-out" class="inline">
              <input type="hidden" name="_csrf" value={props.csrf ?? ""} />
              <span class="muted">{props.email} </span>
              <button class="secondary" type="submit">
                Sign out
              </button>
            </form>
          ) : null}
        </header>
        <main>
          {props.shortfall ? <ShortfallBanner shortfall={props.shortfall} /> : null}
          <h1>{props.title}</h1>
          {props.notice ? <div class="notice">{props.notice}</div> : null}
          {props.error ? <div class="error">{props.error}</div> : null}
          {props.children}
        </main>
        <script>{raw(LOCAL_TIMES)}</script>
      </body>
    </html>
  );
}

/** What the banner says of a shortfall: when the check ran, and by how much the chain is short. */
export interface TreasuryShortfall {
  at: string;
  differenceBaseUnits: string;
}

/** Token base units (6 decimals) as dollars, exact to the unit: "$12.34", "-$0.000001". */
export function usdOfBaseUnits(units: string | bigint) {
  const dollars = dollarsOfBaseUnits(BigInt(units), { grouped: true });
  return dollars.startsWith("-") ? `-$${dollars.slice(1)}` : `$${dollars}`;
}

function ShortfallBanner(props: { shortfall: TreasuryShortfall }) {
  return (
    <div class="shortfall-banner" id="treasury-shortfall" role="alert">
      <strong>Treasury shortfall.</strong> The last check (<When iso={props.shortfall.at} />) found the chain holding{" "}
      {usdOfBaseUnits(props.shortfall.differenceBaseUnits.replace(/^-/, ""))} less than the ledger expects, even after
      every pending payout and refund. <a href="/console/ui/treasury">See the treasury</a>.
    </div>
  );
}

/** "1 payment", "2 payments": a count with its noun. */
export const counted = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** A moment in UTC, readable: "2026-11-26 02:54 UTC" (or the date alone). */
const utcText = (iso: string, dateOnly: boolean) =>
  dateOnly ? iso.slice(0, 10) : `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;

/**
 * A moment as the viewer reads it: the page says it in UTC, with the exact UTC value on hover,
 * and LOCAL_TIMES rewrites it in the viewer's own zone once the page has loaded.
 */
export const When = (props: { iso: string | null; dateOnly?: boolean }) =>
  props.iso ? (
    <time
      datetime={props.iso}
      title={`${props.iso.slice(0, 19).replace("T", " ")} UTC`}
      data-local={props.dateOnly ? "date" : "datetime"}
    >
      {utcText(props.iso, props.dateOnly ?? false)}
    </time>
  ) : (
    <span class="muted">-</span>
  );

/** The one script of the pages: every <time data-local> in the viewer's zone and language. */
const LOCAL_TIMES = `for (const t of document.querySelectorAll("time[data-local]")) {
  const d = new Date(t.dateTime);
  if (Number.isNaN(d.getTime())) continue;
  t.textContent = t.dataset.local === "date"
    ? d.toLocaleDateString(undefined, { dateStyle: "medium" })
    : d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}`;

/** A hidden CSRF field for a session form. */
export const Csrf = (props: { token: string }) => <input type="hidden" name="_csrf" value={props.token} />;

/** Cents as dollars for people; the API keeps integer cents. */
export const usd = (cents: number) =>
  `$${(cents / 100).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

/** A secret shown once, with a copy button (progressive enhancement: the text is selectable without script); `children` say more below it. */
export function ShownOnce(props: { label: string; value: string; id: string; children?: Child }) {
  return (
    <div class="secret">
      <p>
        <strong>{props.label}</strong> — shown once; copy it now.
      </p>
      <code id={props.id}>{props.value}</code>
      {props.children}
      <div>
        <button
          type="button"
          class="secondary"
          onclick={`navigator.clipboard&&navigator.clipboard.writeText(document.getElementById('${props.id}').textContent)`}
        >
          Copy
        </button>
      </div>
    </div>
  );
}

/** Paid volume by UTC hour as a small server-rendered bar chart. */
export function HourlyChart(props: { cents: number[] }) {
  const max = Math.max(1, ...props.cents);
  const width = 24 * 22;
  const height = 120;
  return (
    <svg viewBox={`0 0 ${width} ${height + 18}`} width="100%" role="img" aria-label="Paid volume by hour (UTC)">
      {props.cents.map((value, hour) => {
        const h = Math.round((value / max) * height);
        return (
          <g>
            <rect x={hour * 22 + 3} y={height - h} width="16" height={Math.max(h, value > 0 ? 1 : 0)} fill="#1f6feb">
              <title>{`${String(hour).padStart(2, "0")}:00 ${usd(value)}`}</title>
            </rect>
            {hour % 3 === 0 ? (
              <text x={hour * 22 + 11} y={height + 14} font-size="10" text-anchor="middle" fill="#5d6d7e">
                {String(hour).padStart(2, "0")}
              </text>
            ) : null}
          </g>
        );
      })}
    </svg>
  );
}
