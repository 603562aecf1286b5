import { describe, expect, it } from "vitest";
import type { OpenApiDocument } from "../../src/openapi/document";
import { api } from "../helpers/api";
import { ContractRecorder, operationsOf } from "./recorder";

// The error codes the document lists (src/lib/error-codes.ts): every JSON refusal names the codes
// it may carry. That a provoked refusal's code is among them is checked by the recorder in
// contract.test.ts; that each code is listed under a status ERROR_CODES gives it, by the build.
describe("the document's error codes", () => {
  it("are listed for every JSON refusal of every operation", async () => {
    const doc = (await api("GET", "/openapi.json")).body as OpenApiDocument;
    const rec = new ContractRecorder(doc);
    for (const [key, op] of operationsOf(doc)) {
      for (const status of Object.keys(op.responses).filter((s) => Number(s) >= 400)) {
        const response = rec.response(op, Number(status))!;
        const media = response.content?.["application/json"];
        // JSON-RPC transport refusals carry an error object, not a code.
        if (!media || JSON.stringify(media.schema).endsWith('JsonRpcTransportError"}')) continue;
        expect(response["x-error-codes"]?.length, `${key} ${status}`).toBeGreaterThan(0);
      }
    }
  });
});
