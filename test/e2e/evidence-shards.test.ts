import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BEHIND_A_PROVIDER, type DevServer, expectNothingRefused, startDevServer } from "./dev-server";
import { shardOwners } from "./shard-owners";

// `evidence verify` of the CLI on a charge of ledger shard 1, against `npm run dev` with two shards
// and its local chain: the file a merchant downloads verifies as it is, and names the field changed.
describe("evidence verify with two ledger shards", () => {
  let dev: DevServer;
  let token: string;
  let dir: string;
  beforeAll(async () => {
    dev = await startDevServer({ ...BEHIND_A_PROVIDER.vars, DEV_LEDGER_SHARDS: "2" }, BEHIND_A_PROVIDER.options);
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    dir = mkdtempSync(join(tmpdir(), "agent-pay-evidence-shards-"));
  });
  afterAll(async () => {
    await dev?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const verify = (file: string) => dev.cli("evidence", "verify", file, "--keys", `${dev.url}/.well-known/jwks.json`);

  it("verifies a shard-1 charge's file, and fails a copy whose anchoredBy is another address, naming the field", async () => {
    const { call, charge, merchantsOfEachShard } = shardOwners(dev, token);
    const [, merchantKey] = await merchantsOfEachShard();
    const agent = JSON.parse(dev.cli("agent", "create", "--name", "evidenced", "--credit", "900").stdout.trim());
    const chargeId = await charge(merchantKey, 450);
    expect((await call("POST", `/charges/${chargeId}/pay`, agent.apiKey)).status).toBe(200);

    // Ready once an anchored checkpoint of shard 1 covers the payment: on demand, or the cron (every 2 s here).
    await call("POST", "/console/audit/checkpoints?shard=1", token);
    const path = `/merchant/charges/${chargeId}/evidence`;
    let evidence = await call("GET", path, merchantKey);
    for (let i = 0; i < 50 && evidence.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 200));
      evidence = await call("GET", path, merchantKey);
    }
    expect(evidence.status, evidence.text).toBe(200);
    expect(evidence.body).toMatchObject({ shard: 1, chargeId });
    const file = join(dir, "evidence.json");
    writeFileSync(file, evidence.text);

    const verified = verify(file);
    expect(verified.status, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toContain(`ok      on_chain: transaction ${evidence.body.checkpoint.transaction}`);
    expect(verified.stdout).toContain(`anchors shard 1's checkpoint ${evidence.body.checkpoint.seq}`);
    expect(verified.stdout.trim().split("\n").at(-1)).toBe("evidence ok");
    // Read in windows of 2 blocks from the block of the file's transaction: the same anchor.
    const windowed = dev.cli(
      "evidence",
      "verify",
      file,
      "--keys",
      `${dev.url}/.well-known/jwks.json`,
      "--max-log-range",
      "2",
    );
    expect(windowed.status, windowed.stdout + windowed.stderr).toBe(0);
    expect(windowed.stdout.trim().split("\n").at(-1)).toBe("evidence ok");

    const stranger = "0x000000000000000000000000000000000000dEaD";
    const forged = { ...evidence.body, checkpoint: { ...evidence.body.checkpoint, anchoredBy: stranger } };
    const forgedFile = join(dir, "forged.json");
    writeFileSync(forgedFile, JSON.stringify(forged));
    const refused = verify(forgedFile);
    expect(refused.status, refused.stdout + refused.stderr).toBe(1);
    expect(refused.stdout).toContain(`failed  on_chain: checkpoint.anchoredBy: the file says ${stranger}, `);
    expect(refused.stdout.trim().split("\n").at(-1)).toBe("evidence FAILED");
  });

  it("went through a provider's proxy that refused nothing", async () => {
    await expectNothingRefused(dev);
  });
});
