import { exports } from "cloudflare:workers";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { api, BASE } from "../helpers/api";
import { createAgent, createCharge, createMerchant } from "../helpers/factories";
import { SEED } from "../helpers/seed";

/**
 * The route fuzzer (test/hardening/fuzz.test.ts) never sends MCP's Accept
 * header, so it stops at the transport's 406. This one gets past it: random
 * tool arguments and random JSON-RPC bodies, with a valid agent key, must
 * always come back as a tool result or a JSON-RPC error, never a 5xx, a stack
 * trace or an internal message.
 */

const TOOLS = [
  "get_balance",
  "get_charge",
  "pay_charge",
  "pay_checkout_link",
  "view_paylink",
  "accept_paylink",
  "list_recent_payments",
];
const RUNS = 40;
const STACK_FRAME = /\n\s*at\s|\(\S+\.(?:js|mjs|cjs|ts|tsx):\d+:\d+\)/;

const real = { agentKey: "", ids: [] as string[] };

beforeAll(async () => {
  const merchant = await createMerchant({ category: "data" });
  const agent = await createAgent({
    credit: 2_000,
    policy: { approvalThresholdUsdCents: 300, maxPerTransactionUsdCents: 1_000 },
  });
  real.agentKey = agent.apiKey;
  const small = await createCharge(merchant.apiKey, 100);
  const held = await createCharge(merchant.apiKey, 500);
  const link = await api("POST", "/merchant/checkout", {
    token: merchant.apiKey,
    body: { amountUsdCents: 50, description: "fuzz" },
  });
  const pl = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 1_000 } });
  real.ids = [small.chargeId, held.chargeId, link.body.checkoutToken, pl.body.code, agent.agentId, merchant.merchantId];
});

const text = fc.oneof(
  fc.constant(null).chain(() => fc.constantFrom(...real.ids)),
  fc.constantFrom(
    "",
    " ",
    "x".repeat(64),
    "x".repeat(65),
    "../../etc/passwd",
    "' OR 1=1 --",
    "\u0000",
    "😀".repeat(40),
    "__proto__",
    "constructor",
  ),
  fc.string({ unit: "grapheme", maxLength: 80 }),
);
const value = fc.oneof(text, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.jsonValue({ maxDepth: 2 }));
const args = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.dictionary(
      fc.constantFrom("chargeId", "token", "code", "limit", "agentId", "amountUsdCents", "x"),
      value,
      { maxKeys: 3 },
    ),
  },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

async function post(body: string) {
  const response = await exports.default.fetch(
    new Request(`${BASE}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${real.agentKey}`,
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2025-06-18",
      },
      body,
    }),
  );
  return { status: response.status, type: response.headers.get("content-type") ?? "", text: await response.text() };
}

describe("fuzzing the MCP endpoint past its transport", () => {
  for (const tool of TOOLS) {
    it(`${tool}: random arguments are a tool result or a JSON-RPC error, never a crash`, async () => {
      await fc.assert(
        fc.asyncProperty(args, async (a) => {
          const sent = await post(
            JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: a } }),
          );
          expect(sent.status, sent.text).toBe(200);
          expect(sent.text).not.toMatch(STACK_FRAME);
          const message = JSON.parse(sent.text) as {
            result?: { isError?: boolean; structuredContent?: { error?: unknown } };
            error?: { code: number };
          };
          const isObject = a === undefined || (typeof a === "object" && a !== null && !Array.isArray(a));
          if (!isObject) {
            // Arguments that are not an object fail the protocol's own request shape: invalid params, not a tool's answer.
            expect(message.error?.code, sent.text).toBe(-32602);
            return;
          }
          expect(message.error, sent.text).toBeUndefined();
          const result = message.result!;
          expect(typeof result.isError).toBe("boolean");
          if (result.isError) {
            expect(typeof result.structuredContent?.error).toBe("string");
            expect(result.structuredContent?.error).not.toBe("internal_error");
          }
        }),
        { numRuns: RUNS, seed: SEED },
      );
    });
  }

  it("random JSON-RPC bodies: never a 5xx, always JSON (or an empty 202 for a notification)", async () => {
    const method = fc.constantFrom(
      "initialize",
      "tools/list",
      "tools/call",
      "ping",
      "resources/list",
      "prompts/get",
      "notifications/initialized",
      "nope",
      "",
    );
    const message = fc.record(
      {
        jsonrpc: fc.constantFrom("2.0", "1.0"),
        id: fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.constant(null)),
        method,
        params: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: ["jsonrpc", "method"] },
    );
    const body = fc.oneof(
      message.map((m) => JSON.stringify(m)),
      fc.array(message, { maxLength: 3 }).map((m) => JSON.stringify(m)),
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
      fc.string({ maxLength: 200 }),
    );
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const sent = await post(b);
        expect(sent.status, sent.text).toBeLessThan(500);
        expect(sent.text).not.toMatch(STACK_FRAME);
        if (sent.status === 202) {
          expect(sent.text).toBe("");
          return;
        }
        expect(sent.type).toContain("application/json");
        expect(() => JSON.parse(sent.text)).not.toThrow();
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });
});
