import { z } from "zod";
import { error, json, type Operation } from "../lib/api-operation";
import { body, InvalidRequest } from "../lib/api-shapes";
import { JsonRpcResponse, JsonRpcTransportError } from "./responses";

/** What POST /mcp takes, for the reader: the MCP transport itself parses and checks the JSON-RPC. */
const JsonRpcMessage = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number().int()]).optional().describe("Absent for a notification."),
  method: z.string(),
  params: z.record(z.string(), z.unknown()).optional(),
});
const JsonRpcRequest = z.union([JsonRpcMessage, z.array(JsonRpcMessage).min(1)]);

/** The MCP endpoint: POST only, stateless. */
export const MCP_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/mcp",
    operationId: "mcp",
    summary: "Model Context Protocol (streamable HTTP)",
    description:
      "JSON-RPC 2.0 messages (`initialize`, `tools/list`, `tools/call`, ...) from an agent, answered as JSON. Stateless: no session id, no server-to-client stream. The tools act as the agent whose key is sent, under its policy. Send `Accept: application/json, text/event-stream`.",
    tag: "MCP",
    auth: "agent",
    body: body("JsonRpcRequest", JsonRpcRequest),
    responses: {
      200: json(JsonRpcResponse, "The JSON-RPC answer."),
      202: { description: "A notification or a response from the client: accepted, no body." },
      400: json(
        [JsonRpcTransportError, InvalidRequest],
        "Not JSON-RPC (a JSON-RPC error with a null id), or a body the request guards refuse (`invalid_request`). The `Idempotency-Key` header is not read here: the paying tools take an `idempotencyKey` argument.",
        { errors: ["invalid_request"] },
      ),
      406: json(JsonRpcTransportError, "`Accept` must name both application/json and text/event-stream."),
      415: json(JsonRpcTransportError, "`Content-Type` must be application/json."),
    },
  },
  ...(["get", "delete"] as const).map(
    (method): Operation => ({
      method,
      path: "/mcp",
      operationId: method === "get" ? "mcpStream" : "mcpEndSession",
      summary: method === "get" ? "No server-to-client stream (stateless)" : "No session to end (stateless)",
      tag: "MCP",
      auth: "agent",
      responses: {
        405: { ...error("`method_not_allowed`: only POST.", "method_not_allowed"), headers: { Allow: "POST" } },
      },
    }),
  ),
];
