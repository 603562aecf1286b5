// `npm run client:generate`: writes client/openapi.json (the document exactly as
// GET /openapi.json serves it, built in-process from the route schemas) and
// client/src/schema.d.ts (its types, by openapi-typescript). Both are committed;
// test/openapi/contract.test.ts fails when the first is stale and
// test/e2e/client.test.ts when the second is. It lives beside the service, not in
// client/, because it builds the document from the service's own route schemas.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { schemaTypes } from "../../client/scripts/types";
import { openApiDocument } from "../../src/openapi/document";

const documentPath = fileURLToPath(new URL("../../client/openapi.json", import.meta.url));
const typesPath = fileURLToPath(new URL("../../client/src/schema.d.ts", import.meta.url));

const json = `${JSON.stringify(openApiDocument(), null, 2)}\n`;
writeFileSync(documentPath, json);
writeFileSync(typesPath, await schemaTypes(json));
console.log(`wrote ${documentPath} and ${typesPath}`);
