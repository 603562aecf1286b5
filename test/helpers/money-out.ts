import { expect } from "vitest";
import type { PolicyInput } from "../../src/agents/policy";
import type { RefundView } from "../../src/refunds/service";
import { api } from "./api";
import { createAgent, createCharge, createMerchant, payCharge } from "./factories";

/** A merchant, an agent credited `credit`, and a charge of `cents` the agent paid from its wallet. */
export async function paidCharge(
  cents: number,
  options: { credit?: number; policy?: PolicyInput; name?: string } = {},
) {
  const merchant = await createMerchant({ name: options.name ?? "Refund Co" });
  const agent = await createAgent({
    credit: options.credit ?? cents,
    ...(options.policy ? { policy: options.policy } : {}),
  });
  const charge = await createCharge(merchant.apiKey, cents);
  const paid = await payCharge(agent.apiKey, charge.chargeId);
  expect(paid.status).toBe(200);
  return { merchant, agent, chargeId: charge.chargeId };
}

/** POST /merchant/charges/:chargeId/refunds, the body and headers left out when not given. */
export const refund = (merchantKey: string, chargeId: string, body?: unknown, headers?: Record<string, string>) =>
  api("POST", `/merchant/charges/${chargeId}/refunds`, {
    token: merchantKey,
    ...(body === undefined ? {} : { body }),
    ...(headers ? { headers } : {}),
  });

/** GET /merchant/charges/:chargeId/refunds, the whole answer. */
export const refundList = (merchantKey: string, chargeId: string) =>
  api("GET", `/merchant/charges/${chargeId}/refunds`, { token: merchantKey });

/** A charge's refunds, oldest first. */
export const refundsOf = async (merchantKey: string, chargeId: string) =>
  (await refundList(merchantKey, chargeId)).body.refunds as RefundView[];
