import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schemaTypes } from "../../client/scripts/types";
import { type DevServer, startDevServer } from "./dev-server";

// The typed client (client/): its generated types are those of the committed
// document, and its README example runs as written against `npm run dev`.

const ROOT = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");
const README = read("client/README.md");

/** The fenced block of the README whose info string is `lang` (the first such). */
function block(lang: string): string {
  const match = new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "m").exec(README);
  expect(match, `a \`\`\`${lang} block in client/README.md`).not.toBeNull();
  return match![1]!;
}

describe("the generated client", () => {
  it("client/src/schema.d.ts is what openapi-typescript makes of client/openapi.json (run npm run client:generate)", async () => {
    expect(await schemaTypes(read("client/openapi.json"))).toBe(read("client/src/schema.d.ts"));
  });

  it("the README shows the example file exactly", () => {
    expect(block("ts example")).toBe(read("client/examples/quickstart.ts"));
  });
});

describe("the README example against npm run dev", () => {
  let dev: DevServer;
  beforeAll(async () => {
    dev = await startDevServer();
  });
  afterAll(async () => {
    await dev?.stop();
  });

  it("runs as written: pays a charge, waits out an approval, pays a checkout link, draws on a PayLink, reads the balance, verifies webhooks", () => {
    // The README's commands, pointed at this test's server instead of port 8787.
    const script = block("sh").replaceAll("http://127.0.0.1:8787", dev.url);
    const run = spawnSync("bash", ["-euo", "pipefail", "-c", script], {
      cwd: ROOT,
      env: { ...process.env, SERVICE_URL: dev.url },
      encoding: "utf8",
      timeout: 110_000,
    });
    expect(run.status, `${run.stdout}\n${run.stderr}\n${dev.log().slice(-2000)}`).toBe(0);
    const lines = run.stdout.trim().split("\n");
    expect(lines).toEqual([
      expect.stringMatching(/^paid chg_\w+ reference PAY_\w+$/),
      expect.stringMatching(/^pending approval apr_\w+ requiere_aprobacion_humana$/),
      expect.stringMatching(/^approved and paid chg_\w+ PAY_\w+$/),
      expect.stringMatching(/^checkout paid chg_\w+$/),
      expect.stringMatching(/^paylink plg_\w+ drawn 1000 left 2000$/),
      "balance 4500 USD",
      "verified webhooks approval.required charge.created charge.succeeded paylink.accepted payment.succeeded",
    ]);
  });
});
