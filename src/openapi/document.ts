import { z } from "zod";
import type { Auth, Operation, ResponseSpec } from "../lib/api-operation";
import { requestSchemas, responseSchemas } from "../lib/api-shapes";
import { knownStatuses } from "../lib/error-codes";
import { OPERATIONS } from "./operations";
import { TAGS } from "./tags";

type Json = Record<string, unknown>;

/** The OpenAPI document as served at /openapi.json. */
export interface OpenApiDocument {
  openapi: "3.1.0";
  info: Json;
  jsonSchemaDialect: string;
  servers: Json[];
  tags: Json[];
  "x-tagGroups": { name: string; tags: string[] }[];
  paths: Record<string, Record<string, OperationObject>>;
  components: {
    schemas: Record<string, Json>;
    responses: Record<string, ResponseObject>;
    securitySchemes: Record<string, Json>;
  };
}

export interface ResponseObject {
  description: string;
  headers?: Json;
  content?: Record<string, { schema: Json }>;
  /** The `error` codes this answer may carry (src/lib/error-codes.ts). */
  "x-error-codes"?: string[];
}

export interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Record<string, string[]>[];
  parameters?: Json[];
  requestBody?: Json;
  responses: Record<string, ResponseObject | { $ref: string }>;
}

const COMPONENT = "#/components/schemas/";
const SECURITY: Record<Auth, Record<string, string[]>[]> = {
  merchant: [{ merchantKey: [] }],
  agent: [{ agentKey: [] }],
  console: [{ consoleSession: [] }],
  page: [{ consolePageSession: [] }],
  public: [],
};

/** `/charges/:chargeId` -> `/charges/{chargeId}`; a `:name{a|b}` pattern becomes `{name}`. */
export const openApiPath = (honoPath: string) => honoPath.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");

/** A standalone JSON Schema without the draft marker (the document's dialect says it once). */
function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): Json {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io }) as Json;
  return rest;
}

/** Every named schema of a registry, referring to each other under components.schemas. */
function componentsOf(registry: typeof responseSchemas, io: "input" | "output"): Record<string, Json> {
  const out: Record<string, Json> = {};
  const { schemas } = z.toJSONSchema(registry, { io, uri: (id) => `${COMPONENT}${id}` }) as {
    schemas: Record<string, Json>;
  };
  for (const [id, schema] of Object.entries(schemas)) {
    const { $schema: _dialect, $id: _id, ...rest } = schema;
    out[id] = rest;
  }
  return out;
}

function refOf(schema: z.ZodType, registry: typeof responseSchemas, what: string): Json {
  const id = registry.get(schema)?.id;
  if (!id) throw new Error(`openapi: a ${what} schema is not registered by name`);
  return { $ref: `${COMPONENT}${id}` };
}

function parametersOf(op: Operation): Json[] {
  const parameters: Json[] = [];
  const declared = new Set<string>();
  for (const [name, field] of Object.entries(op.params?.shape ?? {})) {
    declared.add(name);
    parameters.push({ name, in: "path", required: true, schema: jsonSchemaOf(field as z.ZodType, "input") });
  }
  // Path parameters the handler reads without a schema (console pages): strings, or the route's own pattern.
  for (const [, name, pattern] of op.path.matchAll(/:(\w+)(\{[^}]*\})?/g)) {
    if (!name || declared.has(name)) continue;
    parameters.push({
      name,
      in: "path",
      required: true,
      schema: pattern ? { type: "string", enum: pattern.slice(1, -1).split("|") } : { type: "string" },
    });
  }
  for (const [name, field] of Object.entries(op.query?.shape ?? {})) {
    const schema = field as z.ZodType;
    parameters.push({ name, in: "query", required: !schema.isOptional(), schema: jsonSchemaOf(schema, "input") });
  }
  for (const header of op.headers ?? []) {
    parameters.push({
      name: header.name,
      in: "header",
      required: header.required ?? false,
      description: header.description,
      schema: { type: "string" },
    });
  }
  return parameters;
}

function responseOf(spec: ResponseSpec, status: number): ResponseObject {
  const out: ResponseObject = { description: spec.description };
  if (spec.headers) {
    out.headers = Object.fromEntries(
      Object.entries(spec.headers).map(([name, description]) => [name, { description, schema: { type: "string" } }]),
    );
  }
  if (spec.schema) {
    const schemas = Array.isArray(spec.schema) ? spec.schema : [spec.schema];
    const refs = schemas.map((s) => refOf(s, responseSchemas, "response"));
    out.content = {
      [spec.contentType ?? "application/json"]: { schema: refs.length === 1 ? refs[0]! : { anyOf: refs } },
    };
  } else if (spec.contentType) {
    out.content = {
      [spec.contentType]: { schema: spec.contentType === "application/json" ? { type: "object" } : { type: "string" } },
    };
  }
  if (spec.errors?.length) {
    for (const code of spec.errors)
      if (!knownStatuses(code).includes(status as never))
        throw new Error(
          `openapi: ${code} is listed under ${status}, but ERROR_CODES answers it with ${knownStatuses(code)}`,
        );
    out["x-error-codes"] = [...spec.errors];
  }
  return out;
}

/** A shared response once under components.responses, referred to from each operation. */
function responseRefOf(
  spec: ResponseSpec,
  status: number,
  shared: Record<string, ResponseObject>,
): ResponseObject | { $ref: string } {
  const object = responseOf(spec, status);
  if (!spec.component) return object;
  const existing = shared[spec.component];
  if (existing && JSON.stringify(existing) !== JSON.stringify(object))
    throw new Error(`openapi: two responses named ${spec.component}`);
  shared[spec.component] = object;
  return { $ref: `#/components/responses/${spec.component}` };
}

function operationObject(op: Operation, shared: Record<string, ResponseObject>): OperationObject {
  const out: OperationObject = {
    operationId: op.operationId,
    summary: op.summary,
    tags: [op.tag],
    security: SECURITY[op.auth],
    responses: {},
  };
  if (op.description) out.description = op.description;
  const parameters = parametersOf(op);
  if (parameters.length > 0) out.parameters = parameters;
  if (op.body)
    out.requestBody = {
      required: !op.bodyOptional,
      content: { "application/json": { schema: refOf(op.body, requestSchemas, "request") } },
    };
  if (op.form) {
    const properties = Object.fromEntries(
      Object.entries(op.form).map(([name, description]) => [name, { type: "string", description }]),
    );
    out.requestBody = {
      required: true,
      content: { "application/x-www-form-urlencoded": { schema: { type: "object", properties } } },
    };
  }
  for (const status of Object.keys(op.responses)
    .map(Number)
    .sort((a, b) => a - b))
    out.responses[String(status)] = responseRefOf(op.responses[status]!, status, shared);
  return out;
}

function build(): OpenApiDocument {
  const responses = componentsOf(responseSchemas, "output");
  const requests = componentsOf(requestSchemas, "input");
  for (const id of Object.keys(requests))
    if (id in responses) throw new Error(`openapi: schema name ${id} is used twice`);

  const paths: OpenApiDocument["paths"] = {};
  const shared: Record<string, ResponseObject> = {};
  const tags = new Set<string>(TAGS.map((t) => t.name));
  for (const op of OPERATIONS) {
    if (!tags.has(op.tag)) throw new Error(`openapi: ${op.operationId} has an unknown tag ${op.tag}`);
    const path = openApiPath(op.path);
    paths[path] ??= {};
    const item = paths[path];
    if (item[op.method]) throw new Error(`openapi: ${op.method} ${op.path} is listed twice`);
    item[op.method] = operationObject(op, shared);
  }

  const groups = new Map<string, string[]>();
  for (const tag of TAGS) groups.set(tag.group, [...(groups.get(tag.group) ?? []), tag.name]);

  return {
    openapi: "3.1.0",
    info: {
      title: "agent-pay",
      version: "0.1.0",
      description: [
        "A payment service for autonomous software agents: merchants collect from agents that pay from a policy-governed wallet, by x402 on chain, through checkout links or pre-authorized PayLinks; signed webhooks report every change.",
        "",
        "**Credentials.** `Authorization: Bearer <credential>`: a merchant key (`sk_mch_...`), an agent key (`svc_sk_...`) or a console session token (a JWT). A missing or invalid credential is 401 naming the one expected; a valid one of another kind is 403.",
        "",
        '**Errors.** Every failure is `{ "error": <string> }`; an invalid request is 400 `invalid_request` with `issues`. Each response lists the codes it may carry in `x-error-codes`; a code is answered with one status, except `agent_frozen`: 403 to the agent itself, 409 to a merchant\'s draw or a console grant. Amounts are integer USD cents.',
        "",
        "**JSON bodies.** UTF-8 without a byte-order mark (RFC 8259): another `charset` in `Content-Type`, or a byte-order mark, is 415 `unsupported_media_type`. Bytes that are not UTF-8, a key twice in one object (at any depth), or a string or key with a lone UTF-16 surrogate (`\\ud800`): each is 400 `invalid_request`, and nothing is created. `POST /mcp` refuses the same bodies as JSON-RPC errors (415, or 400 with code -32700).",
        "",
        "**Tags.** *Interface* is the service's API for merchants and agents; *Operations* is the console's API for operators; *Service extras* are what the service adds for operators and agents beside them; *Console pages* are the web console.",
      ].join("\n"),
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    servers: [{ url: "/", description: "This deployment (npm run dev: http://127.0.0.1:8787)" }],
    tags: TAGS.map(({ name, description }) => ({ name, description })),
    "x-tagGroups": [...groups].map(([name, tags]) => ({ name, tags })),
    paths,
    components: {
      schemas: { ...responses, ...requests },
      responses: shared,
      securitySchemes: {
        merchantKey: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "sk_mch_...",
          description: "A merchant's API key, shown once at registration.",
        },
        agentKey: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "svc_sk_...",
          description: "An agent's API key: its identity for moving money from its own wallet.",
        },
        consoleSession: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description:
            "A console session token (HS256, aud `console`, at most 12 h) from console sign-in or `npm run cli -- console-token`.",
        },
        consolePageSession: {
          type: "apiKey",
          in: "cookie",
          name: "console_session",
          description: "The console session token as the web console's HttpOnly cookie.",
        },
      },
    },
  };
}

let cached: OpenApiDocument | undefined;

/** The document, built once per isolate from the route schemas and the response schemas. */
export function openApiDocument(): OpenApiDocument {
  cached ??= build();
  return cached;
}
