import { type Schema, Validator } from "@cfworker/json-schema";
import { expect } from "vitest";
import type { OpenApiDocument, OperationObject, ResponseObject } from "../../src/openapi/document";
import { type ApiResponse, api } from "../helpers/api";

type Json = Record<string, unknown>;

export const METHODS = ["get", "post", "put", "patch", "delete"] as const;

/** `/charges/{chargeId}` as a matcher of concrete paths. */
const matcherOf = (template: string) =>
  new RegExp(`^${template.replace(/[.]/g, "\\.").replace(/\{[^}]+\}/g, "[^/]+")}$`);

/**
 * Sends real requests through the Worker and checks each answer against the
 * served document: the operation, its status and its content type are
 * documented, and a JSON body validates against the schema for that status.
 * It remembers what it saw, for the coverage check at the end.
 */
export class ContractRecorder {
  /** "METHOD /template" -> statuses seen. */
  readonly seen = new Map<string, Set<number>>();
  private readonly validators = new Map<string, Validator>();
  private readonly templates: { template: string; matcher: RegExp; params: number }[];

  constructor(readonly doc: OpenApiDocument) {
    this.templates = Object.keys(doc.paths)
      .map((template) => ({ template, matcher: matcherOf(template), params: (template.match(/\{/g) ?? []).length }))
      // A literal segment wins over a parameter (`/console/ui/transactions.csv` before `/console/ui/{x}`).
      .sort((a, b) => a.params - b.params);
  }

  templateOf(path: string): string | undefined {
    const pathname = path.split("?")[0]!;
    return this.templates.find((t) => t.matcher.test(pathname))?.template;
  }

  /** The response an operation documents for `status`, shared ones resolved. */
  response(op: OperationObject, status: number): ResponseObject | undefined {
    const found = op.responses[String(status)];
    if (!found || !("$ref" in found)) return found;
    return this.doc.components.responses[found.$ref.replace("#/components/responses/", "")];
  }

  operation(method: string, template: string): OperationObject | undefined {
    return this.doc.paths[template]?.[method.toLowerCase()];
  }

  private validator(key: string, schema: Json): Validator {
    let validator = this.validators.get(key);
    if (!validator) {
      // Each validator gets its own copy of the components: the library annotates the schemas it indexes.
      validator = new Validator(
        { ...structuredClone(schema), components: structuredClone(this.doc.components) } as Schema,
        "2020-12",
        false,
      );
      this.validators.set(key, validator);
    }
    return validator;
  }

  /** Validates `value` against a schema of the document; fails the test with the validator's own words. */
  expectValid(key: string, schema: Json, value: unknown, label: string) {
    const result = this.validator(key, schema).validate(value);
    const errors = result.errors.map((e) => `${e.instanceLocation} ${e.keyword}: ${e.error}`).slice(0, 8);
    expect(result.valid, `${label}\n${errors.join("\n")}\nbody: ${JSON.stringify(value).slice(0, 600)}`).toBe(true);
  }

  /** Checks one real answer against the document and records it. */
  check(method: string, path: string, res: ApiResponse, sentBody?: unknown) {
    const template = this.templateOf(path);
    const label = `${method} ${path} -> ${res.status}`;
    expect(template, `${label}: no documented path matches`).toBeDefined();
    const op = this.operation(method, template!);
    expect(op, `${method} ${template} is not documented`).toBeDefined();
    const documented = this.response(op!, res.status);
    expect(
      documented,
      `${label}: status not documented for ${method} ${template}; body ${res.text.slice(0, 300)}`,
    ).toBeDefined();

    const contentType = res.headers.get("content-type") ?? "";
    if (documented!.content) {
      const [mediaType, media] = Object.entries(documented!.content)[0]!;
      expect(contentType.startsWith(mediaType), `${label}: content type ${contentType}, documented ${mediaType}`).toBe(
        true,
      );
      if (mediaType === "application/json") {
        const body = JSON.parse(res.text);
        this.expectValid(
          `${method} ${template} ${res.status}`,
          media.schema,
          body,
          `${label}: body does not match the documented schema`,
        );
        // A refusal's code is one the response lists (src/lib/error-codes.ts), the budget code by its pattern.
        if (res.status >= 400 && typeof body?.error === "string") {
          const listed = (documented!["x-error-codes"] ?? []).map((code) => code.replace("<N>", "\\d+"));
          expect(
            listed.some((code) => new RegExp(`^${code}$`).test(body.error)),
            `${label}: error ${body.error} is not among the documented codes ${listed.join(", ")}`,
          ).toBe(true);
        }
      }
    } else {
      expect(res.text, `${label}: documented without a body`).toBe("");
    }

    // What a client sent and the service took must be what the document says it takes.
    const requestSchema = (op!.requestBody as { content?: Record<string, { schema: Json }> } | undefined)?.content?.[
      "application/json"
    ]?.schema;
    if (requestSchema && sentBody !== undefined && res.status < 300) {
      this.expectValid(
        `${method} ${template} request`,
        requestSchema,
        sentBody,
        `${method} ${template}: an accepted request body does not match the documented request schema`,
      );
    }

    const key = `${method.toUpperCase()} ${template}`;
    const statuses = this.seen.get(key) ?? new Set<number>();
    statuses.add(res.status);
    this.seen.set(key, statuses);
  }

  /** `api()` plus the check. */
  async call(method: string, path: string, options: Parameters<typeof api>[2] = {}): Promise<ApiResponse> {
    const res = await api(method, path, options);
    this.check(method, path, res, typeof options.body === "string" ? undefined : options.body);
    return res;
  }
}

/** Every operation of the document as "METHOD /template" with its object. */
export function operationsOf(doc: OpenApiDocument): [string, OperationObject][] {
  const out: [string, OperationObject][] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (op) out.push([`${method.toUpperCase()} ${template}`, op]);
    }
  }
  return out;
}
