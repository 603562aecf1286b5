// `npm run demo:paywall [-- --v1]`: the example API on http://127.0.0.1:4021, its facilitator the
// service of `npm run dev`.
//
// Settings: SERVICE_URL (default http://127.0.0.1:8787); MERCHANT_KEY (without it, a merchant is
// registered through the service's API as the README does, with a console token from the CLI, and
// its key printed once); PAYWALL_PORT (default 4021); PAYWALL_X402_VERSION=1 or --v1 for the
// version 1 middleware (x402-hono) instead of @x402/hono.
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";
import { PAID_PATH, PRICE, paywallV1, paywallV2 } from "./app";
import { facilitatorTerms } from "./facilitator";
import { serve } from "./serve";

const SERVICE_URL = (process.env.SERVICE_URL ?? "http://127.0.0.1:8787").replace(/\/$/, "");

/** A new merchant, as the README registers one: a console session token from the CLI, then POST /merchants. */
async function registerMerchant(): Promise<string> {
  const cli = spawnSync("npm", ["run", "--silent", "cli", "--", "console-token", "--email", "ops@example.com"], {
    env: { ...process.env, SERVICE_URL },
    encoding: "utf8",
  });
  if (cli.status !== 0) throw new Error(`the CLI gave no console token:\n${cli.stderr}`);
  const res = await fetch(`${SERVICE_URL}/merchants`, {
    method: "POST",
    headers: { authorization: `Bearer ${cli.stdout.trim()}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "Paywall demo", category: "data" }),
  });
  if (res.status !== 201) throw new Error(`POST /merchants answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { apiKey: string }).apiKey;
}

async function main() {
  const { values } = parseArgs({ options: { v1: { type: "boolean", default: false } } });
  const version = values.v1 || process.env.PAYWALL_X402_VERSION === "1" ? 1 : 2;
  const given = process.env.MERCHANT_KEY;
  const merchantKey = given || (await registerMerchant());
  const terms = await facilitatorTerms(SERVICE_URL, merchantKey);
  const app = version === 1 ? paywallV1(terms, merchantKey) : paywallV2(terms, merchantKey);
  const served = await serve(app.fetch, Number(process.env.PAYWALL_PORT ?? 4021));
  if (!given) console.log(`[paywall] registered a merchant; its key, shown once: ${merchantKey}`);
  console.log(
    `[paywall] x402 v${version} on ${served.url}: GET ${PAID_PATH} costs ${PRICE}, paid to ${terms.payTo} ` +
      `(${terms.network}, token ${terms.asset}), facilitator ${terms.facilitatorUrl}`,
  );
  const stop = () => served.close().then(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main().catch((error: unknown) => {
  console.error(`[paywall] ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
