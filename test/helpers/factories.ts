import type { PolicyInput } from "../../src/agents/policy";
import { api, consoleToken } from "./api";

export async function createMerchant(options: { name?: string; category?: string } = {}) {
  const res = await api("POST", "/merchants", {
    token: await consoleToken(),
    body: { name: options.name ?? "Acme Data", ...(options.category ? { category: options.category } : {}) },
  });
  if (res.status !== 201) throw new Error(`createMerchant: ${res.status} ${res.text}`);
  return res.body as { merchantId: string; apiKey: string };
}

export async function createAgent(options: { name?: string; policy?: PolicyInput; credit?: number } = {}) {
  const token = await consoleToken();
  const res = await api("POST", "/console/agents", {
    token,
    body: { name: options.name ?? "shopper", ...(options.policy ? { policy: options.policy } : {}) },
  });
  if (res.status !== 201) throw new Error(`createAgent: ${res.status} ${res.text}`);
  const agent = res.body as { agentId: string; apiKey: string };
  if (options.credit) await creditAgent(agent.agentId, options.credit);
  return agent;
}

export async function creditAgent(agentId: string, amountUsdCents: number) {
  const res = await api("POST", `/console/agents/${agentId}/credits`, {
    token: await consoleToken(),
    body: { amountUsdCents },
  });
  if (res.status !== 200) throw new Error(`creditAgent: ${res.status} ${res.text}`);
  return res.body as { balanceMinor: number };
}

export async function createCharge(
  merchantKey: string,
  amountUsdCents: number,
  extra: { description?: string; externalId?: string } = {},
) {
  const res = await api("POST", "/merchant/charges", { token: merchantKey, body: { amountUsdCents, ...extra } });
  if (res.status !== 201) throw new Error(`createCharge: ${res.status} ${res.text}`);
  return res.body as { chargeId: string; amountMinor: number; merchantId: string };
}

/** A checkout link of `merchantKey`'s: `checkoutToken` is the payable `/checkout/:token`. */
export async function createCheckoutLink(merchantKey: string, amountUsdCents: number, description = "one report") {
  const res = await api("POST", "/merchant/checkout", { token: merchantKey, body: { amountUsdCents, description } });
  if (res.status !== 201) throw new Error(`createCheckoutLink: ${res.status} ${res.text}`);
  return res.body as { checkoutLinkId: string; checkoutToken: string; amountMinor: number };
}

export const payCharge = (agentKey: string, chargeId: string) =>
  api("POST", `/charges/${chargeId}/pay`, { token: agentKey });

export async function balanceOf(agentKey: string): Promise<number> {
  const res = await api("GET", "/balance", { token: agentKey });
  if (res.status !== 200) throw new Error(`balance: ${res.status} ${res.text}`);
  return res.body.balanceMinor as number;
}

export async function merchantBalance(merchantKey: string): Promise<number> {
  const res = await api("GET", "/merchant/me", { token: merchantKey });
  return res.body.merchant.balanceMinor as number;
}
