/**
 * The import rules `npm test` enforces (npm run deps): folders only point down.
 *
 *   lib        helpers that know no domain
 *   db         D1 access, statements and batches; knows lib only
 *   chain      the EVM chain client (token ABI, JSON-RPC, receipts); knows lib and the settings' types only
 *   domains    ledger, audit, auth, keys, merchants, agents, approvals, charges, checkout, paylinks,
 *              deposits, kyt, webhooks, x402, outbound, payouts, refunds, sweeps, archive: import lib, db, chain and
 *              each other, never in a circle
 *   surfaces   console, openapi, mcp: import domains; no domain imports them
 *   app.ts, index.ts   wire everything together
 */
const DOMAINS =
  "(chain|ledger|audit|auth|keys|merchants|agents|approvals|charges|checkout|paylinks|deposits|kyt|webhooks|x402|outbound|payouts|refunds|sweeps|treasury|proofs|receipts|checkpoints|archive|settings)";

module.exports = {
  forbidden: [
    {
      name: "no-folder-cycles",
      comment: "Two folders of src/ import each other, directly or through others.",
      severity: "error",
      scope: "folder",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "lib-knows-no-domain",
      comment: "src/lib/ holds helpers: it imports nothing else of src/.",
      severity: "error",
      from: { path: "^src/lib/" },
      to: { path: "^src/", pathNot: "^src/lib/" },
    },
    {
      name: "db-knows-no-domain",
      comment: "src/db/ imports only src/lib/ (and itself).",
      severity: "error",
      from: { path: "^src/db/" },
      to: { path: "^src/", pathNot: "^src/(db|lib)/" },
    },
    {
      name: "chain-knows-no-domain",
      comment: "src/chain/ talks to the EVM chain: it imports only src/lib/ and the settings' types (src/env.ts).",
      severity: "error",
      from: { path: "^src/chain/" },
      to: { path: "^src/", pathNot: "^src/(chain|lib)/|^src/env\\.ts$" },
    },
    {
      name: "domains-know-no-surface",
      comment: "A domain never imports the console, the OpenAPI document or the MCP server.",
      severity: "error",
      from: { path: `^src/${DOMAINS}/` },
      to: { path: "^src/(console|openapi|mcp)/" },
    },
    {
      name: "nothing-imports-the-entry",
      comment: "src/index.ts and src/app.ts wire the service together; nothing below imports them.",
      severity: "error",
      from: { path: "^src/.+/" },
      to: { path: "^src/(index|app)\\.ts$" },
    },
    {
      name: "src-stands-alone",
      comment: "The service does not import tests, scripts, the bench or the client.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^(test|scripts|bench|client)/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: "(^|/)node_modules/" },
  },
};
