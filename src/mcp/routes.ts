import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Hono } from "hono";
import type { AppEnv } from "../app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { mcpServerFor } from "./server";

/**
 * The Model Context Protocol endpoint (streamable HTTP), for agents, with the
 * agent key like every agent route. Stateless: each POST gets a fresh server
 * and transport bound to the key's agent, and a JSON answer; there are no
 * sessions to keep between requests or isolates.
 */
export const mcpRoutes = new Hono<AppEnv>()
  // No Idempotency-Key here (docs/mcp.md): a payment's batch stores the REST route's answer, not a JSON-RPC one.
  .post("/mcp", requireActor("agent", { idempotencyKey: false }), async (c) => {
    const text = await c.req.text();
    // One message per request (MCP dropped JSON-RPC batches): a batch would run up to 100 calls on one rate-limit hit.
    if (text.trimStart().startsWith("[")) {
      return c.json({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "JSON-RPC batches are not supported: send one message per request" } }, 400);
    }
    const { agentId } = actorOf(c.get("actor"), "agent");
    const server = mcpServerFor({ env: c.env, db: c.get("db"), agentId, requestId: c.get("requestId") });
    const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
    await server.connect(transport);
    try {
      // The body was read above; the transport gets a fresh copy.
      const headers = new Headers(c.req.raw.headers);
      headers.delete("content-length");
      return await transport.handleRequest(new Request(c.req.url, { method: "POST", headers, body: text }));
    } finally {
      await server.close();
    }
  })
  // Stateless: no server-to-client stream to open and no session to end. MCP asks for 405 here.
  .on(["GET", "DELETE"], "/mcp", requireActor("agent"), (c) => {
    c.header("Allow", "POST");
    return c.json({ error: "method_not_allowed" }, 405);
  });
