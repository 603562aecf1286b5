import { createServer } from "node:http";
import { agentPay, createAgentPayClient, parseWebhook, unwrap } from "../src/index";

const baseUrl = process.env.AGENT_PAY_URL ?? "http://127.0.0.1:8787";
const env = (name: string) => process.env[name] ?? `missing ${name}`;

// The three credentials: an agent's key, a merchant's key, a console session.
const agent = agentPay({ baseUrl, apiKey: env("AGENT_KEY") });
const merchant = createAgentPayClient({ baseUrl, apiKey: env("MERCHANT_KEY") });
const ops = createAgentPayClient({ baseUrl, apiKey: env("CONSOLE_TOKEN") });

// A webhook receiver that verifies every delivery before trusting it.
const verified: string[] = [];
const receiver = createServer((req, res) => {
  let raw = "";
  req.on("data", (chunk: Buffer) => (raw += chunk.toString("utf8")));
  req.on("end", async () => {
    const check = await parseWebhook({
      secret: hook.secret,
      header: req.headers["x-service-signature"] as string | undefined,
      rawBody: raw,
    });
    if (check.ok) verified.push(check.event.type);
    res.writeHead(check.ok ? 200 : 401).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const { port } = receiver.address() as { port: number };
const me = unwrap(await merchant.GET("/merchant/me"));
const hook = unwrap(
  await ops.POST("/settings/webhooks", { body: { url: `http://127.0.0.1:${port}/hook`, merchantId: me.merchant.id } }),
);

// 1. Pay a charge from the agent's wallet.
const charge = unwrap(
  await merchant.POST("/merchant/charges", { body: { amountUsdCents: 1500, description: "dataset" } }),
);
const paid = await agent.payCharge(charge.chargeId, { idempotencyKey: `pay-${charge.chargeId}` });
if (paid.status === "paid") console.log("paid", paid.charge.chargeId, "reference", paid.charge.reference);

// 2. Over the agent's approval threshold the payment waits for a human; nothing is charged until then.
const big = unwrap(
  await merchant.POST("/merchant/charges", { body: { amountUsdCents: 2500, description: "a bigger dataset" } }),
);
const held = await agent.payCharge(big.chargeId);
if (held.status === "pending_approval") {
  console.log("pending approval", held.approvalId, held.reason);
  unwrap(await ops.POST("/approvals/{id}/grant", { params: { path: { id: held.approvalId } } }));
  const settled = await agent.waitForCharge(big.chargeId, { intervalMs: 200 });
  console.log("approved and paid", settled.chargeId, settled.reference);
}

// 3. Pay a checkout link: each payment is a new charge of the link's amount.
const link = unwrap(
  await merchant.POST("/merchant/checkout", { body: { amountUsdCents: 500, description: "one report" } }),
);
const bought = await agent.payCheckoutLink(link.checkoutToken);
if (bought.status === "paid") console.log("checkout paid", bought.charge.chargeId);

// 4. Accept a PayLink; the merchant then draws on it.
const paylink = unwrap(
  await merchant.POST("/merchant/paylinks", { body: { budgetUsdCents: 3000, label: "monthly data" } }),
);
const grant = await agent.acceptPayLink(paylink.code);
const balance = await agent.getBalance();
const draw = unwrap(
  await merchant.POST("/merchant/paylinks/{code}/charge", {
    params: { path: { code: paylink.code } },
    body: { agentId: balance.agentId, amountUsdCents: 1000 },
  }),
);
console.log("paylink", grant.grantId, "drawn", draw.spentMinor, "left", draw.remainingMinor);

// 5. The balance, and the webhooks, each verified (deliveries are asynchronous: give them a moment).
console.log("balance", (await agent.getBalance()).balanceMinor, balance.currency);
const kinds = ["charge.created", "payment.succeeded", "charge.succeeded", "approval.required", "paylink.accepted"];
for (let i = 0; i < 100 && !kinds.every((kind) => verified.includes(kind)); i++)
  await new Promise((resolve) => setTimeout(resolve, 200));
console.log("verified webhooks", [...new Set(verified)].sort().join(" "));
receiver.close();
