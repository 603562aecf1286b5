import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Hono } from "hono";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { isJsonContentType, readStrictJson } from "../lib/strict-json";
import { mcpServerFor } from "./server";

type Body = { ok: true; text: string } | { ok: false; status: 400 | 415; code: number; message: string };

/**
 * The body's text, read as strictly as every JSON route reads its body
 * (lib/validation.ts), or the JSON-RPC refusal: the transport's JSON.parse
 * would keep the last of two equal keys and take a lone surrogate. Malformed
 * JSON, or a body not declared JSON, goes on to the transport's own answer.
 */
function readBody(contentType: string | undefined, bytes: Uint8Array): Body {
  if (!isJsonContentType(contentType)) return { ok: true, text: new TextDecoder().decode(bytes) };
  const read = readStrictJson(bytes, contentType);
  if (read.ok || read.reason === "malformed_json") return { ok: true, text: read.text };
  if (read.reason === "unsupported_encoding")
    return {
      ok: false,
      status: 415,
      code: -32000,
      message: "Unsupported Media Type: the body must be UTF-8 JSON without a byte-order mark",
    };
  const where = read.issue.path ? ` (at ${read.issue.path})` : "";
  return { ok: false, status: 400, code: -32700, message: `Parse error: ${read.issue.message}${where}` };
}

/**
 * The Model Context Protocol endpoint (streamable HTTP), for agents, with the
 * agent key like every agent route. Stateless: each POST gets a fresh server
 * and transport bound to the key's agent, and a JSON answer; there are no
 * sessions to keep between requests or isolates.
 */
export const mcpRoutes = new Hono<AppEnv>()
  // The Idempotency-Key header is ignored here (docs/mcp.md): one request may carry any call, so the paying
  // tools take an `idempotencyKey` argument instead, kept per call (./paying.ts).
  .post("/mcp", requireActor("agent", { idempotencyKey: false }), async (c) => {
    const body = readBody(c.req.header("Content-Type"), new Uint8Array(await c.req.arrayBuffer()));
    if (!body.ok)
      return c.json({ jsonrpc: "2.0", id: null, error: { code: body.code, message: body.message } }, body.status);
    const { text } = body;
    // One message per request (MCP dropped JSON-RPC batches): a batch would run up to 100 calls on one rate-limit hit.
    if (text.trimStart().startsWith("[")) {
      return c.json(
        {
          jsonrpc: "2.0",
          id: null,
          error: { code: -32600, message: "JSON-RPC batches are not supported: send one message per request" },
        },
        400,
      );
    }
    const { agentId } = actorOf(c.get("actor"), "agent");
    const server = mcpServerFor({ env: c.env, agentId, requestId: c.get("requestId") });
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
