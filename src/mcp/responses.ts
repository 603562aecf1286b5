import { z } from "zod";
import { named } from "../lib/api-shapes";

/** Response bodies: MCP (JSON-RPC 2.0 over streamable HTTP, JSON answers). */

const JsonRpcId = z.union([z.string(), z.number().int()]);

const JsonRpcResult = z.strictObject({
  jsonrpc: z.literal("2.0"),
  id: JsonRpcId,
  result: z.record(z.string(), z.unknown()),
});

const JsonRpcFailure = z.strictObject({
  jsonrpc: z.literal("2.0"),
  id: JsonRpcId.nullable(),
  error: z.strictObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
});

export const JsonRpcResponse = named(
  "JsonRpcResponse",
  z.union([JsonRpcResult, JsonRpcFailure, z.array(z.union([JsonRpcResult, JsonRpcFailure]))]),
  "A JSON-RPC 2.0 answer (or a batch of them); a tool's failure is a result with `isError: true`.",
);

export const JsonRpcTransportError = named(
  "JsonRpcTransportError",
  JsonRpcFailure,
  "The transport refused the request (not JSON-RPC, wrong Accept or Content-Type); `id` is null.",
);
