/**
 * The import rules `npm test` enforces (npm run deps; test/house/deps-rules.test.ts breaks each on
 * purpose): every module of src/ sits in a layer, and layers only point down.
 *
 *   lib        helpers that know no domain
 *   config     the settings: parsed from vars and secrets; knows lib only
 *   db         D1 access, statements and batches; knows lib only
 *   chain      the EVM chain client (token ABI, JSON-RPC, receipts); knows lib only
 *   domains    DOMAINS below: import lib, config, db, chain and each other, never in a circle
 *   surfaces   console, openapi, mcp: import domains; no domain imports them
 *   jobs       the cron's work (src/jobs/): imports domains; nothing below imports it
 *   index.ts, app.ts   the entry: wire everything together; the only files at the root of src/
 */
const DOMAINS =
  "(ledger|audit|auth|keys|merchants|agents|approvals|charges|checkout|paylinks|deposits|kyt|webhooks|x402|outbound|payouts|refunds|sweeps|treasury|proofs|receipts|checkpoints|archive)";
const LAYERS = `(lib|config|db|chain|${DOMAINS.slice(1, -1)}|console|openapi|mcp|jobs)`;

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
      comment: "src/chain/ talks to the EVM chain: it imports only src/lib/ (its settings type is its own).",
      severity: "error",
      from: { path: "^src/chain/" },
      to: { path: "^src/", pathNot: "^src/(chain|lib)/" },
    },
    {
      name: "config-knows-no-domain",
      comment: "src/config/ parses the settings: it imports only src/lib/ (and itself).",
      severity: "error",
      from: { path: "^src/config/" },
      to: { path: "^src/", pathNot: "^src/(config|lib)/" },
    },
    {
      name: "domains-know-no-surface",
      comment: "A domain never imports the console, the OpenAPI document or the MCP server.",
      severity: "error",
      from: { path: `^src/${DOMAINS}/` },
      to: { path: "^src/(console|openapi|mcp)/" },
    },
    {
      name: "domains-know-no-job",
      comment: "The cron's jobs (src/jobs/) call the domains; no domain or surface calls a job.",
      severity: "error",
      from: { path: `^src/(lib|config|db|chain|console|openapi|mcp|${DOMAINS.slice(1, -1)})/` },
      to: { path: "^src/jobs/" },
    },
    {
      name: "nothing-imports-the-root",
      comment:
        "Files at the root of src/ (the entry: index.ts, app.ts) wire the service together; nothing below imports them.",
      severity: "error",
      from: { path: "^src/.+/" },
      to: { path: "^src/[^/]+\\.ts$" },
    },
    {
      name: "root-holds-only-the-entry",
      comment: "Only index.ts and app.ts sit at the root of src/: any other module belongs in a layer's folder.",
      severity: "error",
      from: { path: "^src/[^/]+\\.ts$", pathNot: "^src/(index|app)\\.ts$" },
      to: {},
    },
    {
      name: "every-folder-in-a-layer",
      comment: "A folder of src/ the layers above do not name: add it to DOMAINS or to a layer.",
      severity: "error",
      from: { path: "^src/[^/]+/", pathNot: `^src/${LAYERS}/` },
      to: {},
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
