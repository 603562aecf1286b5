import { exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BASE } from "../helpers/api";

/** What went over the wire, so a test can see the HTTP side of the protocol. */
export interface Exchange {
  method: string;
  status: number;
}

/**
 * The SDK's own client, over the SDK's streamable HTTP transport, whose fetch
 * calls the Worker in-process (the same entry point as test/helpers/api.ts).
 */
export async function connectAgent(agentKey: string | undefined, exchanges: Exchange[] = []) {
  const client = new Client({ name: "mcp-test-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${BASE}/mcp`), {
    requestInit: agentKey === undefined ? {} : { headers: { authorization: `Bearer ${agentKey}` } },
    fetch: async (url, init) => {
      const response = await exports.default.fetch(new Request(url, init));
      exchanges.push({ method: init?.method ?? "GET", status: response.status });
      return response;
    },
  });
  await client.connect(transport);
  return client;
}

export interface ToolCall {
  isError: boolean;
  /** `structuredContent`: the API's body (or `{ error, status, ... }` for a refusal). */
  body: Record<string, any>;
  text: string;
}

/** Calls a tool and returns its result; a protocol error rejects instead. */
export async function callTool(client: Client, name: string, args?: Record<string, unknown>): Promise<ToolCall> {
  const result = await client.callTool({ name, arguments: args });
  const first = Array.isArray(result.content) ? result.content[0] : undefined;
  const text = first && first.type === "text" ? first.text : "";
  return { isError: result.isError === true, body: (result.structuredContent ?? {}) as Record<string, any>, text };
}
