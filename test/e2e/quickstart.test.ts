import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "./dev-server";

// The README's curl walkthrough against `npm run dev`, with the operator CLI.
describe("npm run dev and the CLI", () => {
  let dev: DevServer;
  beforeAll(async () => {
    dev = await startDevServer();
  });
  afterAll(async () => {
    await dev?.stop();
  });

  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${dev.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  };

  it("walks the quick start: token, merchant, agent, charge, pay, approval, CSV, audit verify", async () => {
    const tokenRun = dev.cli("console-token", "--email", "ops@example.com");
    expect(tokenRun.status).toBe(0);
    const token = tokenRun.stdout.trim();
    // Only the token, nothing else, on standard output.
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);

    const merchant = await call("POST", "/merchants", token, { name: "Acme Data", category: "data" });
    expect(merchant.status).toBe(201);
    const merchantKey = merchant.json().apiKey as string;

    const agentRun = dev.cli("agent", "create", "--name", "shopper", "--credit", "10000", "--max-per-tx", "5000", "--approval-threshold", "2000", "--categories", "data");
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
    expect((await call("POST", `/charges/${over.chargeId}/pay`, agent.apiKey)).json()).toEqual({ error: "excede_tope_por_transaccion" });

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
    expect(lines[0]).toBe("seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash");
    expect(lines).toHaveLength(1 + 3); // the credit and two payments

    const verify = dev.cli("audit", "verify");
    expect(verify.status).toBe(0);
    expect(verify.stdout).toContain("audit chain ok: 3 rows");

    // Tamper with one row behind the service's back: the CLI names it.
    const tampered = dev.d1("UPDATE audit_events SET amount_minor = amount_minor + 1 WHERE seq = 2");
    expect(tampered.status, tampered.stderr + tampered.stdout).toBe(0);
    const broken = dev.cli("audit", "verify");
    expect(broken.status).toBe(1);
    expect(broken.stdout).toContain("audit chain BROKEN at seq 2: hash_mismatch");
  });

  it("bundles as `wrangler dev` does: no warning that node: imports are missing (the Node.js compatibility mode is set)", () => {
    expect(dev.log()).toContain("ready on");
    expect(dev.log()).not.toMatch(/wasn't found on the file system|enable the "nodejs_compat" compatibility flag/);
  });
});
