import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, BASE, consoleToken } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { registerEndpoint } from "../helpers/webhooks";

/*
 * A JSON route reads only a body declared JSON. hono hands the schema `{}`
 * for any other Content-Type (or none), and the spending policy, whose every
 * field is optional, took that as "no limits": a form post or an empty PUT
 * wiped them with a 200. Now it is the 400 of any invalid body
 * (docs/api.md, Errors and status codes).
 */

const LIMITS = {
  maxPerTransactionUsdCents: 777,
  dailyLimitUsdCents: 5000,
  allowedCategories: ["data"],
  approvalThresholdUsdCents: 300,
  allowedX402Hosts: ["api.example"],
};
const JSON_BODY_REQUIRED = {
  error: "invalid_request",
  issues: [{ path: "", code: "json_body_required", message: expect.stringContaining("JSON body is required") }],
};

/** A PUT with exactly this body and Content-Type: bytes, so nothing is added (a string body would get text/plain). */
async function putPolicy(agentId: string, body: string | undefined, contentType: string | undefined) {
  const headers: Record<string, string> = { authorization: `Bearer ${await consoleToken()}` };
  if (contentType !== undefined) headers["content-type"] = contentType;
  const request = new Request(`${BASE}/console/agents/${agentId}/policy`, {
    method: "PUT",
    headers,
    body: body === undefined ? undefined : new TextEncoder().encode(body),
  });
  const response = await exports.default.fetch(request);
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text), text };
}
const policyOf = async (agentId: string) =>
  (await api("GET", `/console/agents/${agentId}`, { token: await consoleToken() })).body.policy;

describe("PUT /console/agents/:agentId/policy with a body that is not declared JSON", () => {
  it.each([
    ["text/plain (JSON text, but not declared so)", JSON.stringify({ maxPerTransactionUsdCents: 1 }), "text/plain"],
    [
      "application/x-www-form-urlencoded (curl -d's default)",
      "maxPerTransactionUsdCents=1",
      "application/x-www-form-urlencoded",
    ],
    ["no body and no Content-Type", undefined, undefined],
    ["a body and no Content-Type", "{}", undefined],
    ["application/jsonx (not a JSON type)", "{}", "application/jsonx"],
  ] as const)("%s: 400 invalid_request, and the policy is unchanged", async (_label, body, contentType) => {
    const agent = await createAgent({ policy: LIMITS });
    const res = await putPolicy(agent.agentId, body, contentType);
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual(JSON_BODY_REQUIRED);
    expect(await policyOf(agent.agentId)).toEqual(LIMITS);
  });

  it.each([["application/json; charset=utf-8"], ["Application/JSON;charset=UTF-8"], ["application/merge-patch+json"]])(
    "%s is JSON: the policy is replaced",
    async (contentType) => {
      const agent = await createAgent({ policy: LIMITS });
      const res = await putPolicy(agent.agentId, JSON.stringify({ dailyLimitUsdCents: 900 }), contentType);
      expect(res.status, res.text).toBe(200);
      const expected = {
        maxPerTransactionUsdCents: null,
        dailyLimitUsdCents: 900,
        allowedCategories: null,
        approvalThresholdUsdCents: null,
        allowedX402Hosts: null,
      };
      expect(res.body).toEqual({ policy: expected });
      expect(await policyOf(agent.agentId)).toEqual(expected);
    },
  );

  it("an explicit {} still clears every limit: the client said so", async () => {
    const agent = await createAgent({ policy: LIMITS });
    const res = await putPolicy(agent.agentId, "{}", "application/json");
    expect(res.status, res.text).toBe(200);
    expect(await policyOf(agent.agentId)).toEqual({
      maxPerTransactionUsdCents: null,
      dailyLimitUsdCents: null,
      allowedCategories: null,
      approvalThresholdUsdCents: null,
      allowedX402Hosts: null,
    });
  });

  it("an empty body declared JSON stays the malformed-JSON 400", async () => {
    const agent = await createAgent({ policy: LIMITS });
    const res = await putPolicy(agent.agentId, "", "application/json");
    expect(res.status, res.text).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    expect(await policyOf(agent.agentId)).toEqual(LIMITS);
  });
});

describe("other JSON routes", () => {
  it("a required body left out is the same 400 (agent credits)", async () => {
    const agent = await createAgent();
    const res = await api("POST", `/console/agents/${agent.agentId}/credits`, { token: await consoleToken() });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual(JSON_BODY_REQUIRED);
  });

  it("rotate-secret may leave its body out (every field has a default): 24 h of grace, as the walkthrough's curl does", async () => {
    const endpoint = await registerEndpoint(`json-body-rotate-${crypto.randomUUID().slice(0, 8)}`);
    const before = Date.now();
    const res = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, { token: await consoleToken() });
    expect(res.status, res.text).toBe(200);
    const graceMs = Date.parse(res.body.previousSecretExpiresAt) - before;
    expect(graceMs).toBeGreaterThan(86_400_000 - 60_000);
    expect(graceMs).toBeLessThan(86_400_000 + 60_000);
  });

  it("rotate-secret with a form body is still refused: only a missing body reads as {}", async () => {
    const endpoint = await registerEndpoint(`json-body-rotate-form-${crypto.randomUUID().slice(0, 8)}`);
    const res = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, {
      token: await consoleToken(),
      body: "graceSeconds=0",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual(JSON_BODY_REQUIRED);
  });
});
