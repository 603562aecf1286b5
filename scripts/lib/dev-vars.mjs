// Local development secrets live in .dev.vars (git-ignored), which wrangler dev
// reads. The first run writes a random console session secret there, so no
// secret is ever committed and a fresh clone needs no set-up.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { generateMnemonic } from "viem/accounts";
import { english } from "viem/accounts";

export const DEV_VARS_PATH = fileURLToPath(new URL("../../.dev.vars", import.meta.url));

export function readDevVars(path = DEV_VARS_PATH) {
  if (!existsSync(path)) return {};
  const vars = {};
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const match = /^\s*([A-Z0-9_]+)\s*=\s*"?(.*?)"?\s*$/.exec(line);
    if (match) vars[match[1]] = match[2];
  }
  return vars;
}

/** Each generated secret and how to make a fresh one. */
const GENERATED = {
  CONSOLE_SESSION_SECRET: () => randomBytes(32).toString("base64url"),
  WEBHOOK_SECRETS_KEY: () => randomBytes(32).toString("base64url"),
  DEPOSIT_MNEMONIC: () => generateMnemonic(english),
};

/** Makes sure .dev.vars holds every generated secret; returns the vars. */
export function ensureDevVars(path = DEV_VARS_PATH) {
  const vars = readDevVars(path);
  const missing = Object.keys(GENERATED).filter((name) => !vars[name]);
  if (missing.length > 0) {
    let text = existsSync(path)
      ? readFileSync(path, "utf8").replace(/\n*$/, "\n")
      : "# Local development secrets (git-ignored). Written by scripts/dev.mjs.\n";
    for (const name of missing) {
      vars[name] = GENERATED[name]();
      text += `${name}="${vars[name]}"\n`;
    }
    writeFileSync(path, text, { mode: 0o600 });
  }
  return vars;
}
