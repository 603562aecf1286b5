// `npm run dev`: the whole service at http://127.0.0.1:8787 on local workerd,
// with the D1 migrations applied and local secrets in place. No account or
// network is needed.
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ensureDevVars } from "./lib/dev-vars.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const wrangler = fileURLToPath(new URL("../node_modules/.bin/wrangler", import.meta.url));
const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: process.env.CI ?? "true" };
const port = process.env.PORT ?? "8787";
// Tests run their own instance beside a developer's, with separate state.
const persist = process.env.DEV_PERSIST_DIR ? ["--persist-to", process.env.DEV_PERSIST_DIR] : [];

const step = (message) => console.log(`[dev] ${message}`);

ensureDevVars();
step("applying D1 migrations to the local database");
const migrate = spawnSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", ...persist], { cwd: root, env, stdio: "inherit" });
if (migrate.status !== 0) {
  console.error("[dev] migrations failed");
  process.exit(migrate.status ?? 1);
}

step(`starting the service at http://127.0.0.1:${port}`);
const server = spawn(wrangler, ["dev", "--local", "--ip", "127.0.0.1", "--port", port, "--show-interactive-dev-session=false", ...persist], { cwd: root, env, stdio: "inherit" });

// Local workerd does not fire cron triggers by itself; fire the scheduled
// handler every minute, as production's cron does (approval expiry sweep).
const base = `http://127.0.0.1:${port}`;
const cron = setInterval(() => {
  fetch(`${base}/cdn-cgi/handler/scheduled`).catch(() => undefined);
}, 60_000);
cron.unref();

const stop = (signal) => {
  if (!server.killed) server.kill(signal);
};
process.on("SIGINT", () => stop("SIGINT"));
process.on("SIGTERM", () => stop("SIGTERM"));
server.on("exit", (code, signal) => process.exit(code ?? (signal ? 0 : 1)));
