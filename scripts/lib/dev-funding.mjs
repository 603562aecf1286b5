// `npm run dev` books the local chain's own mint to the settlement address as the operator's funding
// (POST /console/treasury/fundings), so a fresh local service reads `balanced`, not a surplus forever.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
const tsx = fileURLToPath(new URL("../../node_modules/.bin/tsx", import.meta.url));
/** Who books it (the audit row names them): the console user of wrangler.toml's development CONSOLE_USERS, as the CLI's. */
const DEV_OPERATOR = "ops@example.com";

/** A console token from the operator CLI's own `console-token` (scripts/cli.ts): its secret, its signing. */
function consoleToken(email) {
  return new Promise((resolve, reject) => {
    const child = spawn(tsx, ["scripts/cli.ts", "console-token", "--email", email], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(out.trim()) : reject(new Error(`console-token exited with ${code}: ${err.trim()}`)),
    );
  });
}

/** Base units of the 6-decimal token as whole tokens, for the log. */
const tokens = (baseUnits) => `${(BigInt(baseUnits) / 1_000_000n).toLocaleString("en-US")} tokens`;

/**
 * Books each of `transactions` at the service running at `base`, logging one line each. Booked
 * before (a restart on the same chain) is fine; anything else is logged and left: the service runs
 * on, reading a surplus, and never stops for this.
 */
export async function bookDevFundings({ base, transactions, log }) {
  if (!transactions?.length) return;
  try {
    const token = await consoleToken(DEV_OPERATOR);
    for (const transaction of transactions) {
      const res = await fetch(`${base}/console/treasury/fundings`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ transaction }),
        signal: AbortSignal.timeout(30_000),
      });
      const body = await res.json().catch(() => null);
      if (res.status === 201)
        log(
          `booked the settlement float ${transaction} (${tokens(body.funding.amountBaseUnits)}) as the operator's funding`,
        );
      else if (res.status === 409 && body?.error === "funding_already_booked")
        log(`the settlement float ${transaction} is booked already as the operator's funding`);
      else log(`could not book the settlement float ${transaction}: ${res.status} ${JSON.stringify(body)}`);
    }
  } catch (error) {
    log(`could not book the settlement float: ${error instanceof Error ? error.message : String(error)}`);
  }
}
