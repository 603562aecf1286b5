import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevServer, startDevServer } from "./dev-server";

// The first section of docs/walkthrough.md ("Try it with curl") against `npm run dev`, with the operator CLI;
// when the walkthrough's commands or answers change, this test changes with them.
describe("npm run dev and the CLI", () => {
  let dev: DevServer;
  beforeAll(async () => {
    dev = await startDevServer();
  });
  afterAll(async () => {
    await dev?.stop();
  });

  // A connection per request: the CLI runs under spawnSync, which blocks this process past the server's
  // keep-alive timeout, so a pooled connection could be closed under the next request ("other side closed").
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        connection: "close",
        ...(body ? { "content-type": "application/json" } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  };

  // First, on the server as it starts: nothing else has moved money yet.
  it("books the local chain's settlement float before it is ready, so a fresh service's treasury reads balanced", async () => {
    const booked =
      /\[dev\] booked the settlement float (0x[0-9a-f]{64}) \(100,000 tokens\) as the operator's funding\n[\s\S]*\[dev\] ready on /.exec(
        dev.log(),
      );
    expect(booked, dev.log()).not.toBeNull();
    const funding = booked![1]!;
    const token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    const treasury = await call("GET", "/console/treasury", token);
    expect(treasury.status, treasury.text).toBe(200);
    const float = String(100_000n * 1_000_000n);
    expect(treasury.json()).toMatchObject({
      holdings: { settlementBaseUnits: float, depositAddressesBaseUnits: "0", totalBaseUnits: float },
      ledger: { onChainInMinor: 0, onChainOutMinor: 0, floatBaseUnits: float, expectedBaseUnits: float },
      differenceBaseUnits: "0",
      status: "balanced",
    });
    // The booking is the audit chain's first row; booking it again is refused.
    const first = dev.d1("SELECT type, reference FROM audit_events WHERE seq = 1");
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toContain('"type": "treasury.funding_booked"');
    expect(first.stdout).toContain(`"reference": "${funding}"`);
    const again = await call("POST", "/console/treasury/fundings", token, { transaction: funding });
    expect(again.status).toBe(409);
    expect(again.json()).toEqual({ error: "funding_already_booked" });
  });

  it("walks the quick start: token, merchant, agent, charge, pay, approval, CSV, audit verify", async () => {
    const tokenRun = dev.cli("console-token", "--email", "ops@example.com");
    expect(tokenRun.status).toBe(0);
    const token = tokenRun.stdout.trim();
    // Only the token, nothing else, on standard output.
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);

    const merchant = await call("POST", "/merchants", token, { name: "Acme Data", category: "data" });
    expect(merchant.status).toBe(201);
    const merchantKey = merchant.json().apiKey as string;

    const agentRun = dev.cli(
      "agent",
      "create",
      "--name",
      "shopper",
      "--credit",
      "10000",
      "--max-per-tx",
      "5000",
      "--approval-threshold",
      "2000",
      "--categories",
      "data",
    );
    expect(agentRun.status).toBe(0);
    const agent = JSON.parse(agentRun.stdout.trim()) as { agentId: string; apiKey: string };
    expect(agent.agentId).toMatch(/^agent_/);
    expect(agent.apiKey).toMatch(/^svc_sk_/);

    const balance = await call("GET", "/balance", agent.apiKey);
    expect(balance.json()).toMatchObject({ agentId: agent.agentId, balanceMinor: 10000, currency: "USD" });

    const charge = (await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: 1500 })).json();
    const paid = await call("POST", `/charges/${charge.chargeId}/pay`, agent.apiKey);
    expect(paid.status).toBe(200);
    expect(paid.json().charge.reference).toMatch(/^PAY_/);

    const over = (await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: 6000 })).json();
    expect((await call("POST", `/charges/${over.chargeId}/pay`, agent.apiKey)).json()).toEqual({
      error: "excede_tope_por_transaccion",
    });

    const held = (await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: 2500 })).json();
    const hold = await call("POST", `/charges/${held.chargeId}/pay`, agent.apiKey);
    expect(hold.status).toBe(402);
    const approvalId = hold.json().approvalId as string;
    const granted = await call("POST", `/approvals/${approvalId}/grant`, token);
    expect(granted.status).toBe(200);
    expect(granted.json().charge.status).toBe("paid");

    const csv = await call("GET", "/export/transactions.csv", token);
    expect(csv.status).toBe(200);
    const lines = csv.text.trim().split("\r\n");
    expect(lines[0]).toBe(
      "seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash,amountBaseUnits",
    );
    expect(lines).toHaveLength(1 + 4); // the float's booking at start, the credit and two payments

    const verify = dev.cli("audit", "verify");
    expect(verify.status).toBe(0);
    expect(verify.stdout).toContain("audit chain ok: 4 rows");
    expect(verify.stdout).toContain("checkpoints ok: ");

    // Tamper with one row behind the service's back: the CLI names it.
    const tampered = dev.d1("UPDATE audit_events SET amount_minor = amount_minor + 1 WHERE seq = 2");
    expect(tampered.status, tampered.stderr + tampered.stdout).toBe(0);
    const broken = dev.cli("audit", "verify");
    expect(broken.status).toBe(1);
    expect(broken.stdout).toContain("audit chain BROKEN at seq 2: hash_mismatch");
    // Put back, for the checks that follow.
    expect(dev.d1("UPDATE audit_events SET amount_minor = amount_minor - 1 WHERE seq = 2").status).toBe(0);
  });

  // After the walkthrough, whose audit counts it would change.
  it("rolls an agent's key, freezes and unfreezes it from the CLI, which prints the API's answers and exits 1 on a refusal", async () => {
    const token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    const merchantKey = (await call("POST", "/merchants", token, { name: "Switch Shop" })).json().apiKey as string;
    const agent = JSON.parse(dev.cli("agent", "create", "--name", "switched", "--credit", "1000").stdout.trim()) as {
      agentId: string;
      apiKey: string;
    };
    const status = async (key: string) => (await call("GET", "/balance", key)).status;
    const pay = async (key: string) =>
      call(
        "POST",
        `/charges/${(await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: 100 })).json().chargeId}/pay`,
        key,
      );

    const rollRun = dev.cli("agent", "roll-key", agent.agentId, "--grace", "0");
    expect(rollRun.status, rollRun.stderr).toBe(0);
    expect(rollRun.stdout.trim().split("\n")).toHaveLength(1);
    const rolled = JSON.parse(rollRun.stdout) as { agentId: string; apiKey: string; previousKeyExpiresAt: string };
    expect(Object.keys(rolled).sort()).toEqual(["agentId", "apiKey", "previousKeyExpiresAt"]);
    expect(rolled.agentId).toBe(agent.agentId);
    expect(rolled.apiKey).toMatch(/^svc_sk_[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(rolled.previousKeyExpiresAt)).toBeLessThanOrEqual(Date.now());
    // The old key ends everywhere within 5 s; the new one works at once.
    const deadline = Date.now() + 5_000;
    while ((await status(agent.apiKey)) !== 401 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await status(agent.apiKey)).toBe(401);
    expect(await status(rolled.apiKey)).toBe(200);

    const freezeRun = dev.cli("agent", "freeze", agent.agentId, "--reason", "lost laptop");
    expect(freezeRun.status, freezeRun.stderr).toBe(0);
    expect(JSON.parse(freezeRun.stdout)).toEqual({ agentId: agent.agentId, frozen: true });
    const refused = await pay(rolled.apiKey);
    expect(refused.status).toBe(403);
    expect(refused.json()).toEqual({ error: "agent_frozen" });

    const unfreezeRun = dev.cli("agent", "unfreeze", agent.agentId);
    expect(unfreezeRun.status, unfreezeRun.stderr).toBe(0);
    expect(JSON.parse(unfreezeRun.stdout)).toEqual({ agentId: agent.agentId, frozen: false });
    expect((await pay(rolled.apiKey)).status).toBe(200);

    // Refusals: the API's error on standard error, nothing on standard output, exit 1; a usage mistake exits 2.
    const unknown = dev.cli("agent", "freeze", "agent_doesnotexist");
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain('answered 404: {"error":"agent_not_found"}');
    const tooLong = dev.cli("agent", "roll-key", agent.agentId, "--grace", "604801");
    expect(tooLong.status).toBe(1);
    expect(tooLong.stderr).toContain("answered 400: ");
    expect(JSON.parse(tooLong.stderr.slice(tooLong.stderr.indexOf("{")))).toMatchObject({
      error: "invalid_request",
      issues: [{ path: "graceSeconds" }],
    });
    expect(await status(rolled.apiKey)).toBe(200);
    expect(dev.cli("agent", "unfreeze").status).toBe(2);
  });

  it("bundles as `wrangler dev` does: no warning that node: imports are missing (the Node.js compatibility mode is set)", () => {
    expect(dev.log()).toContain("ready on");
    expect(dev.log()).not.toMatch(/wasn't found on the file system|enable the "nodejs_compat" compatibility flag/);
  });

  // Before the test that removes rows: a file made now must hold against the chain as it stands.
  it("hands a merchant a charge's evidence file that `evidence verify` checks offline, and names a tampered part", async () => {
    const token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    const merchantKey = (await call("POST", "/merchants", token, { name: "Evidence Co" })).json().apiKey as string;
    const agent = JSON.parse(dev.cli("agent", "create", "--name", "evidenced", "--credit", "900").stdout.trim());
    const charge = (await call("POST", "/merchant/charges", merchantKey, { amountUsdCents: 450 })).json();
    expect((await call("POST", `/charges/${charge.chargeId}/pay`, agent.apiKey)).status).toBe(200);
    const path = `/merchant/charges/${charge.chargeId}/evidence`;
    // Ready once an anchored checkpoint covers the payment: the cron (every 2 s here) or on demand.
    await call("POST", "/console/audit/checkpoints", token);
    let evidence = await call("GET", path, merchantKey);
    for (let i = 0; i < 50 && evidence.status === 409; i++) {
      await new Promise((r) => setTimeout(r, 200));
      evidence = await call("GET", path, merchantKey);
    }
    expect(evidence.status, evidence.text).toBe(200);
    const dir = mkdtempSync(join(tmpdir(), "agent-pay-evidence-"));
    const file = join(dir, "evidence.json");
    writeFileSync(file, evidence.text);

    const verified = dev.cli("evidence", "verify", file, "--keys", `${dev.url}/.well-known/jwks.json`);
    expect(verified.status, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toContain("ok      on_chain: transaction ");
    expect(verified.stdout.trim().split("\n").at(-1)).toBe("evidence ok");
    // The file's own keys are never trusted: without --keys it refuses to judge.
    expect(dev.cli("evidence", "verify", file).status).toBe(2);
    // A key set that is not one (here the OpenAPI document) is said to be none, not met as a TypeError.
    const notKeys = dev.cli("evidence", "verify", file, "--keys", `${dev.url}/openapi.json`);
    expect(notKeys.status).toBe(1);
    expect(notKeys.stderr).toContain(`${dev.url}/openapi.json is not a JWK set`);

    const forged = evidence.json();
    forged.auditRow.amountMinor = 45;
    writeFileSync(file, JSON.stringify(forged));
    const refused = dev.cli("evidence", "verify", file, "--keys", `${dev.url}/.well-known/jwks.json`);
    expect(refused.status).toBe(1);
    expect(refused.stdout).toContain("failed  audit_row: ");
    expect(refused.stdout.trim().split("\n").at(-1)).toBe("evidence FAILED");
    rmSync(dir, { recursive: true, force: true });
  });

  // After the walkthrough (its tampered row put back).
  it("anchors audit checkpoints on the local chain, and audit verify names the one that rows removed from the end contradict", async () => {
    const token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    dev.cli("agent", "create", "--name", "anchored", "--credit", "700");
    const made = await call("POST", "/console/audit/checkpoints", token);
    expect([200, 201]).toContain(made.status);
    const seq = made.json().checkpoint.seq as number;
    // Anchored within the request, or by the cron (every 2 s here) soon after.
    let latest: { seq: number; transaction: string | null } = made.json().checkpoint;
    for (let i = 0; i < 50 && !latest.transaction; i++) {
      await new Promise((r) => setTimeout(r, 200));
      latest = (await call("GET", "/audit/checkpoints/latest", token)).json().checkpoint;
    }
    expect(latest).toMatchObject({ seq, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });

    const verify = dev.cli("audit", "verify");
    expect(verify.status, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toContain(`latest anchored: seq ${seq} (tx ${latest.transaction})`);

    // The last row and the checkpoints that reach it removed behind the service's back: the chain alone is fine.
    const removed = dev.d1(
      `DELETE FROM audit_events WHERE seq = ${seq}; DELETE FROM audit_checkpoints WHERE seq >= ${seq};`,
    );
    expect(removed.status, removed.stderr + removed.stdout).toBe(0);
    const broken = dev.cli("audit", "verify");
    expect(broken.status).toBe(1);
    expect(broken.stdout).toContain(`audit chain ok: ${seq - 1} rows`);
    expect(broken.stdout).toContain("checkpoints FAILED");
    expect(broken.stdout).toContain(
      `checkpoint seq ${seq} (tx ${latest.transaction}): anchor_contradicts_rows: the rows end at seq ${seq - 1}`,
    );

    // With no chain to read (no local chain recorded where it looks), it refuses to judge rather than
    // pass over the anchors, which alone show the rows and checkpoints removed above (an outside attack
    // read "audit verify ok" here); --offline asks for the rest and says what it left out.
    const nowhere = mkdtempSync(join(tmpdir(), "agent-pay-no-chain-"));
    const refused = dev.cliWith({ DEV_PERSIST_DIR: nowhere }, "audit", "verify");
    expect(refused.status, refused.stdout + refused.stderr).toBe(2);
    expect(refused.stderr).toContain("no chain to read anchors from");
    const offline = dev.cliWith({ DEV_PERSIST_DIR: nowhere }, "audit", "verify", "--offline");
    expect(offline.status, offline.stdout + offline.stderr).toBe(0);
    expect(offline.stdout).not.toContain("not yet on chain");
    expect(offline.stdout.trim().split("\n").at(-1)).toMatch(
      /^audit verify ok \(offline: anchors on chain not checked\): shard 0$/,
    );
    rmSync(nowhere, { recursive: true, force: true });
  });
});
