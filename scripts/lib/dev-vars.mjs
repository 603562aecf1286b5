// Local development secrets live in .dev.vars (git-ignored), which wrangler dev
// reads. The first run writes a random console session secret there, so no
// secret is ever committed and a fresh clone needs no set-up.
import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, linkSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
    const existed = existsSync(path);
    let text = existed
      ? readFileSync(path, "utf8").replace(/\n*$/, "\n")
      : "# Local development secrets (git-ignored). Written by scripts/dev.mjs.\n";
    for (const name of missing) {
      vars[name] = GENERATED[name]();
      text += `${name}=${quoted(vars[name])}\n`;
    }
    if (existed) writeFileSync(path, text, { mode: 0o600 });
    else {
      // A new file appears whole and only if still absent (link fails on an existing name): two first
      // starts at once (the e2e files on a fresh clone) would each write secrets of their own, and a
      // server could read the half written or the overwritten one. The one that lost reads the winner's.
      const draft = `${path}.${process.pid}.draft`;
      writeFileSync(draft, text, { mode: 0o600 });
      try {
        linkSync(draft, path);
      } catch (error) {
        if (error?.code !== "EEXIST") throw error;
        return ensureDevVars(path);
      } finally {
        rmSync(draft, { force: true });
      }
    }
  }
  return vars;
}
