import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { paywall } from "../helpers/stand-in-paywall";
import { callTool, connectAgent } from "./client";

/*
 * pay_x402_resource when the paid request goes wrong after the wallet was debited: the paywall
 * takes the payment, then redirects the paid request to an address the guard refuses (or hangs).
 * The payment is made and kept; the tool's answer must say so, or an agent that reads an error
 * as "nothing happened" pays again on its next call.
 */

describe("pay_x402_resource: an answer after the debit names the payment", () => {
  it("the paid request redirected to a forbidden address: the answer carries the payment made", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["127.0.0.1"] }, credit: 100 });
    const { url } = paywall({ amount: "1000" });
    const paidThenRedirected = `${url}&paidRedirect=${encodeURIComponent("https://169.254.169.254/latest/meta-data/")}`;
    const client = await connectAgent(agent.apiKey);
    const result = await callTool(client, "pay_x402_resource", { url: paidThenRedirected });
    const listed = (await api("GET", "/agent/x402/payments", { token: agent.apiKey })).body.payments as {
      paymentId: string;
    }[];
    // The wallet paid once (the debit happened before the paid request was sent) ...
    expect(listed).toHaveLength(1);
    // ... and the tool's answer, error or not, names that payment.
    expect(result.body.payment, result.text).toMatchObject({ paymentId: listed[0]!.paymentId });
    await client.close();
  });
});
