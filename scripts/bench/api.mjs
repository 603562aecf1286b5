// The benchmark seeds everything through the public API, as a merchant, an agent and a console
// user would (docs/walkthrough.md, "Try it with curl"); only the console token comes from the CLI.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** A JSON call that must answer `expected`; anything else stops the benchmark with the answer. */
export async function call(base, method, path, { token, body, expected = [200, 201] } = {}) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!expected.includes(res.status))
    throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}

/** Runs `fn` over `items` with at most `concurrency` in flight; results in order. */
export async function inParallel(items, concurrency, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}

/** `npm run --silent cli -- console-token`: the operator's own way to a console session. */
export function consoleToken(base) {
  const result = spawnSync("npm", ["run", "--silent", "cli", "--", "console-token", "--email", "ops@example.com"], {
    cwd: ROOT,
    env: { ...process.env, SERVICE_URL: base },
    encoding: "utf8",
  });
  const token = result.stdout.trim();
  if (result.status !== 0 || !token) throw new Error(`console-token failed: ${result.stderr}`);
  return token;
}

export const createMerchant = (base, console, name) =>
  call(base, "POST", "/merchants", { token: console, body: { name } });

/** An agent with no policy limits and `credit` cents in its wallet. */
export async function createAgent(base, console, name, credit) {
  const agent = await call(base, "POST", "/console/agents", { token: console, body: { name } });
  await call(base, "POST", `/console/agents/${agent.agentId}/credits`, {
    token: console,
    body: { amountUsdCents: credit },
  });
  return agent;
}

export const createCharge = (base, merchantKey, amountUsdCents = 1) =>
  call(base, "POST", "/merchant/charges", { token: merchantKey, body: { amountUsdCents, description: "bench" } });

/** `n` pending charges of one merchant, created `concurrency` at a time; their ids. */
export async function createCharges(base, merchantKey, n, concurrency = 16, amountUsdCents = 1) {
  const made = await inParallel(Array.from({ length: n }), concurrency, () =>
    createCharge(base, merchantKey, amountUsdCents),
  );
  return made.map((c) => c.chargeId);
}
