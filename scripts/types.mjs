// `npm run types` writes worker-types.d.ts (the bindings of wrangler.toml and the runtime's own types,
// by `wrangler types`); `npm run types:check` fails when that file is stale.
//
// The file must not depend on the machine. `wrangler types` adds every name in .dev.vars (which
// `npm run dev` writes) or .env as a secret, and its own `--check` reads .dev.vars again whatever the
// file was made with. So this script passes an empty env file (which stops wrangler reading .dev.vars
// and .env), keeps the process environment out, and checks by generating a fresh copy and comparing.
// Secrets and optional settings are typed by the settings modules (src/config/settings.ts), not here.
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const wrangler = fileURLToPath(new URL("../node_modules/.bin/wrangler", import.meta.url));
const FILE = "worker-types.d.ts";
const SCRATCH = ".worker-types.check.d.ts";

/** Runs `wrangler types` into `file` (relative to the repository) with the fixed arguments. */
function generate(file) {
  const run = spawnSync(wrangler, ["types", file, "--strict-vars=false", "--env-file", "/dev/null"], {
    cwd: root,
    env: {
      ...process.env,
      CLOUDFLARE_INCLUDE_PROCESS_ENV: "false",
      CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "false",
      WRANGLER_SEND_METRICS: "false",
      CI: "true",
    },
    encoding: "utf8",
  });
  if (run.status !== 0) {
    console.error(run.stdout, run.stderr);
    process.exit(run.status ?? 1);
  }
}

if (process.argv.includes("--check")) {
  try {
    generate(SCRATCH);
    // The header names the file it was written to; everything else must match byte for byte.
    const fresh = readFileSync(`${root}/${SCRATCH}`, "utf8").replace(SCRATCH, FILE);
    let committed = "";
    try {
      committed = readFileSync(`${root}/${FILE}`, "utf8");
    } catch {
      // missing: stale by definition
    }
    if (fresh !== committed) {
      console.error(`${FILE} is out of date with wrangler.toml or wrangler: run \`npm run types\` and commit it.`);
      process.exit(1);
    }
    console.log(`${FILE} is up to date.`);
  } finally {
    rmSync(`${root}/${SCRATCH}`, { force: true });
  }
} else {
  generate(FILE);
  console.log(`wrote ${FILE}`);
}
