import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { ToolContext } from "./define";
import { TOOLS } from "./tools";

const BY_NAME = new Map(TOOLS.map((tool) => [tool.listing.name, tool]));

/**
 * Registers `tools/call` by its method alone. With the full request schema
 * the SDK (1.32) parses first and answers a malformed call (`arguments: []`)
 * as -32603 internal error; this way its own tools/call check answers -32602
 * invalid params, as JSON-RPC says, and the handler parses the full schema.
 */
const ToolsCallMethod = z.looseObject({ method: z.literal("tools/call") });

const INSTRUCTIONS = [
  "Pay merchants from your own wallet in this payment service.",
  "Amounts are integer USD cents (balanceMinor, amountMinor).",
  "Every payment is checked against your policy: a refusal comes back as an error result with its reason;",
  "a payment over your approval threshold comes back with pendingApproval and an approvalId, and nothing is charged until a person grants it.",
  "Your key is your wallet: no tool takes an agent id.",
  "Send pay_charge and pay_checkout_link a new idempotencyKey for each purchase; if an answer is lost or unclear, repeat the call with the same key, or read the charge with get_charge, instead of paying again.",
  "pay_x402_resource fetches a URL and pays its x402 paywall from your wallet if it asks (your policy must allow the host); it too takes an idempotencyKey.",
].join(" ");

/**
 * A fresh MCP server for one request, bound to the authenticated agent.
 * The low-level `Server` rather than `McpServer`: `McpServer` validates tool
 * arguments itself and answers failures in its own words, where these tools
 * answer the API's `invalid_request` with `issues` (docs/mcp.md).
 */
export function mcpServerFor(ctx: ToolContext): Server {
  const server = new Server(
    { name: "agent-pay", title: "Agent Pay", version: "0.1.0" },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS.map((tool) => tool.listing) }));
  server.setRequestHandler(ToolsCallMethod, async (message) => {
    const parsed = CallToolRequestSchema.safeParse(message);
    if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, "Invalid tools/call request");
    const request = parsed.data;
    const tool = BY_NAME.get(request.params.name);
    // An unknown tool is a protocol error (MCP: invalid params); a known tool's failures are tool results.
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name.slice(0, 100)}`);
    return tool.call(ctx, request.params.arguments);
  });
  return server;
}
