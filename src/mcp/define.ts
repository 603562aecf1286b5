import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Env } from "../config/env";
import { ApiError } from "../lib/errors";
import { log } from "../lib/log";
import { issuesOf } from "../lib/validation";

/**
 * What a tool runs with. `agentId` comes from the credential the request was
 * authenticated with, never from tool input: no tool takes an agent id, and
 * every input object is strict, so naming one is refused as invalid input.
 */
export interface ToolContext {
  env: Env;
  agentId: string;
  requestId: string;
}

/** A tool's answer: the API's response body and a one-line summary for the text rendering. */
export interface ToolAnswer {
  body: Record<string, unknown>;
  summary: string;
}

export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

export interface ToolDefinition<S extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: S;
  annotations: ToolAnnotations;
  /** Throws `ApiError` for refusals, exactly where the matching route does; `defineTool` renders it as an error result. */
  run: (ctx: ToolContext, input: z.output<S>) => Promise<ToolAnswer>;
}

/** A tool as the server serves it: its `tools/list` entry, and a call that never throws. */
export interface ServedTool {
  listing: Tool;
  call: (ctx: ToolContext, args: unknown) => Promise<CallToolResult>;
}

function rendered(body: Record<string, unknown>, summary: string, isError: boolean): CallToolResult {
  // Structured content for programs; the same JSON after a readable line for models that read only text.
  return { content: [{ type: "text", text: `${summary}\n${JSON.stringify(body)}` }], structuredContent: body, isError };
}

/**
 * A refusal as a tool result: the API's error body `{ error, ...extra }` plus
 * the HTTP status the route answers, so a 402 policy refusal and a 409
 * conflict are told apart without parsing the string.
 */
export function errorResult(status: number, error: string, extra: Record<string, unknown> = {}): CallToolResult {
  return rendered({ ...extra, error, status }, `Error ${status}: ${error}`, true);
}

/** Unexpected failures, as `app.onError` treats them: only the error is logged, never the request. */
function failureResult(error: unknown, requestId: string): CallToolResult {
  if (error instanceof ApiError) return errorResult(error.status, error.error, error.extra);
  if (typeof error === "object" && error !== null && (error as { overloaded?: unknown }).overloaded === true) {
    // A Durable Object shedding load; the agent may call again shortly.
    return errorResult(503, "overloaded");
  }
  log.error("mcp_tool", { requestId, error });
  return errorResult(500, "internal_error", { requestId });
}

/** JSON.parse keeps a `__proto__` key as an own property and zod's strict objects skip it (as in lib/validation.ts): refuse it. */
function hasProtoKey(value: unknown, depth = 0): boolean {
  if (value === null || typeof value !== "object" || depth > 32) return false;
  if (Object.hasOwn(value, "__proto__")) return true;
  return Object.values(value as Record<string, unknown>).some((v) => hasProtoKey(v, depth + 1));
}

/** The input schema as JSON Schema for `tools/list`, generated from the same zod schema that validates calls. */
function inputJsonSchema(schema: z.ZodType): Tool["inputSchema"] {
  // The dialect line is left out: MCP's default dialect is this same draft 2020-12.
  const { $schema: _dialect, ...json }: Record<string, unknown> = z.toJSONSchema(schema, { io: "input" });
  if (json.type !== "object") throw new Error("a tool's input schema must be an object");
  return json as Tool["inputSchema"];
}

/**
 * Serves a tool definition: validates the arguments with its zod schema (a
 * failure is the API's 400 `invalid_request` with `issues`, as a tool error),
 * runs it, and turns every refusal or failure into a tool result, so a call
 * never becomes a protocol error or leaks an internal message.
 */
export function defineTool<S extends z.ZodType>(def: ToolDefinition<S>): ServedTool {
  return {
    listing: {
      name: def.name,
      title: def.title,
      description: def.description,
      inputSchema: inputJsonSchema(def.input),
      annotations: { title: def.title, ...def.annotations },
    },
    async call(ctx, args) {
      const raw = args ?? {};
      if (hasProtoKey(raw))
        return errorResult(400, "invalid_request", {
          issues: [{ path: "__proto__", code: "unrecognized_keys", message: "unrecognized key: __proto__" }],
        });
      const parsed = def.input.safeParse(raw);
      if (!parsed.success) return errorResult(400, "invalid_request", { issues: issuesOf(parsed.error) });
      try {
        const answer = await def.run(ctx, parsed.data);
        return rendered(answer.body, answer.summary, false);
      } catch (error) {
        return failureResult(error, ctx.requestId);
      }
    },
  };
}
