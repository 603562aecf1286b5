// Local development secrets live in .dev.vars (git-ignored), which wrangler dev
// reads. The first run writes a random console session secret there, so no
// secret is ever committed and a fresh clone needs no set-up.
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { english, generateMnemonic } from "viem/accounts";

export const DEV_VARS_PATH = fileURLToPath(new URL("../../.dev.vars", import.meta.url));

export function readDevVars(path = DEV_VARS_PATH) {
  if (!existsSync(path)) return {};
  const vars = {};
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const match = /^\s*([A-Z0-9_]+)\s*=\s*(["']?)(.*?)\2\s*$/.exec(line);
    if (match) vars[match[1]] = match[3];
  }
  return vars;
}

/** Each generated secret and how to make a fresh one. */
const GENERATED = {
  CONSOLE_SESSION_SECRET: () => randomBytes(32).toString("base64url"),
  WEBHOOK_SECRETS_KEY: () => randomBytes(32).toString("base64url"),
  DEPOSIT_MNEMONIC: () => generateMnemonic(english),
  RECEIPT_SIGNING_KEY: devSigningKey,
};

/** An Ed25519 private JWK whose kid marks it as a development key (production refuses those). */
function devSigningKey() {
  const jwk = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" });
  const id = createHash("sha256").update(jwk.x).digest("base64url").slice(0, 12);
  return JSON.stringify({ ...jwk, kid: `dev-only-${id}` });
}

/** JSON values go in single quotes, which dotenv reads verbatim (double quotes would end at the first inner quote). */
const quoted = (value) => (value.includes('"') ? `'${value}'` : `"${value}"`);

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
      text += `${name}=${quoted(vars[name])}\n`;
    }
    writeFileSync(path, text, { mode: 0o600 });
  }
  return vars;
}
