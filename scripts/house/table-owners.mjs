// Each table's SQL stays with its owner (#38): lists every use of a table in src/ outside the folder
// that owns it, src/db (the schema and the statements' plumbing) and src/ledger (which commits every
// domain's plans). `node scripts/house/table-owners.mjs` prints them by file, then counted by table and
// by folder; `--styles` counts the data-access styles of each file instead.
//
// A use is SQL text naming a table after FROM, JOIN, INTO or UPDATE, in any case, in a string or
// template literal shaped like a statement (SELECT, INSERT INTO, UPDATE .. SET, ...: prose is not
// SQL, and comments are not literals); `${x}` there names a table when x is a literal, a choice of
// literals or a local constant holding them. Also a table's name passed to a helper that builds such
// SQL (TABLE_ARGUMENTS), and drizzle: a table object imported from src/db, and the queries built on it
// (`.from(t)`, `.insert(t)`, `.update(t)`, `.delete(t)`, `.innerJoin(t)`, ..., `db.query.t`). An
// import with `type` only reads a row's shape and is not a use.
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";

/**
 * The folder of src/ that owns each table: other folders call its exported statements. An owner sits
 * low enough for its users to import it without a circle; a folder below the owner that must still
 * read or write the table (auth's key lookups, keys' rolls, webhooks' merchant check) has that statement in src/db, beside the
 * table's schema. A value may list several folders, though none does.
 */
export const OWNERS = {
  agents: "agents",
  // The wallet object decides and writes an agent's outbound x402 payments, and reads them for its daily spend.
  agent_x402_payments: "agents",
  // The wallet object holds, grants and expires approvals; approvals/ (routes, lists) imports agents/.
  approvals: "agents",
  // The audit chain's history index: audit/archived.ts reads it; archive/ (which imports audit/) writes it.
  archive_segments: "audit",
  archived_audit_refs: "audit",
  // Archived ledger entries' carried totals: the ledger's figures.
  archived_balances: "ledger",
  // The audit chain's: audit/ verifies against them; checkpoints/ (which imports audit/) writes and anchors them.
  audit_checkpoints: "audit",
  audit_events: "audit",
  audit_verifications: "audit",
  batch_guards: "ledger",
  chain_cursors: "deposits",
  charges: "charges",
  checkout_links: "checkout",
  console_login_codes: "console",
  console_revoked_sessions: "auth",
  console_users: "auth",
  deposits: "deposits",
  // The Idempotency-Key middleware (auth/idempotency.ts); the statements that commit answers are src/db's.
  idempotency_claims: "auth",
  idempotency_keys: "auth",
  kyt_blocklist: "kyt",
  ledger_arrivals: "ledger",
  ledger_entries: "ledger",
  ledger_transfers: "ledger",
  merchants: "merchants",
  outbound_transfers: "outbound",
  outbox_events: "webhooks",
  paylink_grants: "paylinks",
  paylinks: "paylinks",
  payouts: "payouts",
  // lib/rate-limit.ts: a helper below every domain, and the table's only user.
  rate_limits: "lib",
  receiving_addresses: "x402",
  refunds: "refunds",
  shard_directory: "ledger",
  treasury_checks: "treasury",
  treasury_fundings: "treasury",
  webhook_attempts: "webhooks",
  webhook_deliveries: "webhooks",
  webhook_endpoints: "webhooks",
  x402_payments: "x402",
  x402_resources: "x402",
};

/** Folders that may use every table: the schema and statement plumbing, and the ledger that commits plans. */
export const EVERYWHERE = ["db", "ledger"];

/** Helpers that build SQL around a table's name given as an argument: the argument's index. */
export const TABLE_ARGUMENTS = { pagedDelete: 2 };

const DRIZZLE_CALLS = new Set(["from", "insert", "update", "delete", "innerJoin", "leftJoin", "rightJoin", "fullJoin"]);
// A literal is SQL when it has a statement's shape; prose ("merchants collect from agents") has none.
const SQL_SHAPE = /\b(SELECT\b|INSERT\s+(OR\s+\w+\s+)?INTO\b|REPLACE\s+INTO\b|DELETE\s+FROM\b|UPDATE\s+\S+\s+SET\b)/i;
const SQL_TABLE = /\b(FROM|JOIN|INTO|UPDATE)\s+\\?[`"[]?([A-Za-z_][A-Za-z0-9_]*|\uE000+)/gi;

/** The folder of src/ a file sits in ("(root)" for index.ts and app.ts). */
export const folderOf = (file) => {
  const parts = file.split("/");
  return parts.length > 2 ? parts[1] : "(root)";
};

/** May a file of `folder` use `table`? */
export const mayUse = (folder, table) => EVERYWHERE.includes(folder) || [OWNERS[table] ?? []].flat().includes(folder);

/**
 * The tables the migrations leave standing (created, less those dropped or renamed away) and the
 * drizzle tables of src/db: `drizzle` maps each table object's exported name to its table.
 */
export function tablesOf(root) {
  const standing = new Set();
  const dir = path.join(root, "migrations");
  const ddl =
    /\b(?:CREATE TABLE(?: IF NOT EXISTS)?|DROP TABLE(?: IF EXISTS)?|ALTER TABLE)\s+[`"]?(\w+)[`"]?(\s+RENAME TO\s+[`"]?(\w+))?/gi;
  for (const name of fs
    .readdirSync(dir)
    .filter((n) => n.endsWith(".sql"))
    .sort()) {
    for (const m of fs.readFileSync(path.join(dir, name), "utf8").matchAll(ddl)) {
      const verb = m[0].slice(0, 4).toUpperCase();
      if (verb === "CREA") standing.add(m[1]);
      else if (verb === "DROP") standing.delete(m[1]);
      else if (m[3]) {
        standing.delete(m[1]);
        standing.add(m[3]);
      }
    }
  }
  const drizzle = new Map();
  const dbDir = path.join(root, "src/db");
  for (const name of fs.readdirSync(dbDir).filter((n) => n.endsWith(".ts"))) {
    const source = parse(path.join(dbDir, name));
    const visit = (node) => {
      if (ts.isVariableDeclaration(node) && node.initializer && ts.isCallExpression(node.initializer)) {
        const { expression, arguments: args } = node.initializer;
        if (ts.isIdentifier(expression) && expression.text === "sqliteTable" && args[0] && ts.isStringLiteral(args[0]))
          drizzle.set(node.name.getText(source), args[0].text);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { migrations: [...standing].sort(), drizzle };
}

/** Every use of a table in the .ts/.tsx files of `root`/src: { file, table, line, kind }, in file order. */
export function tableUses(root) {
  const { migrations, drizzle } = tablesOf(root);
  const tables = new Set([...migrations, ...drizzle.values()]);
  return sourceFiles(root).flatMap((file) => usesIn(root, file, tables, drizzle));
}

/** The uses of tables outside their owner, src/db and src/ledger. */
export const tableViolations = (root) => tableUses(root).filter((use) => !mayUse(folderOf(use.file), use.table));

/** Violations as file → the tables it uses outside their owner, sorted: the shape STILL_TO_MOVE keeps. */
export function violationsByFile(violations) {
  const byFile = {};
  for (const { file, table } of violations) byFile[file] = [...new Set([...(byFile[file] ?? []), table])].sort();
  return Object.fromEntries(Object.entries(byFile).sort(([a], [b]) => a.localeCompare(b)));
}

function sourceFiles(root) {
  const files = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(full);
    }
  };
  walk(path.join(root, "src"));
  return files.sort();
}

function parse(file) {
  const kind = file.endsWith("x") ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  return ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true, kind);
}

function usesIn(root, full, tables, drizzle) {
  const source = parse(full);
  const file = path.relative(root, full).split(path.sep).join("/");
  const found = new Map();
  const add = (node, table, kind, offset = node.getStart(source)) => {
    const line = source.getLineAndCharacterOfPosition(offset).line + 1;
    found.set(`${line}:${kind}:${table}`, { file, table, line, kind });
  };
  const bound = tableBindings(source, full, root, drizzle);
  for (const [table, specifier] of bound.imported) add(specifier, table, "drizzle-import");
  const visit = (node) => {
    if (ts.isImportDeclaration(node)) return;
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) {
      for (const { table, offset } of sqlTables(node, source, tables)) add(node, table, "sql", offset);
    }
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (ts.isPropertyAccessExpression(callee) && DRIZZLE_CALLS.has(callee.name.text) && node.arguments[0]) {
        const kind = `drizzle-${callee.name.text.replace(/^\w+Join$/, "join")}`;
        for (const table of bound.tablesOf(node.arguments[0])) add(callee.name, table, kind);
      }
      const at = ts.isIdentifier(callee) ? TABLE_ARGUMENTS[callee.text] : undefined;
      const arg = at === undefined ? undefined : node.arguments[at];
      if (arg && ts.isStringLiteralLike(arg) && tables.has(arg.text)) add(arg, arg.text, "sql-helper");
    }
    if (ts.isPropertyAccessExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const table = drizzle.get(node.name.text);
      if (node.expression.name.text === "query" && table) add(node.name, table, "drizzle-query");
    }
    if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const table = bound.namespaces.has(node.expression.text) ? drizzle.get(node.name.text) : undefined;
      if (table) add(node, table, "drizzle-import");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return [...found.values()].sort((a, b) => a.line - b.line || a.table.localeCompare(b.table));
}

/**
 * The drizzle tables a file imports from src/db (not `import type`): `imported` (table → its import
 * specifier), `namespaces` (names of `import * as` of src/db), and `tablesOf(expression)`, the tables an
 * expression is: an imported table, a choice between them, or a local constant holding one.
 */
function tableBindings(source, full, root, drizzle) {
  const imported = new Map();
  const local = new Map();
  const namespaces = new Set();
  const dbDir = path.join(root, "src/db");
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || statement.importClause?.isTypeOnly) continue;
    const target = path.resolve(path.dirname(full), statement.moduleSpecifier.text);
    if (path.dirname(target) !== dbDir) continue;
    const bindings = statement.importClause?.namedBindings;
    if (bindings && ts.isNamespaceImport(bindings)) namespaces.add(bindings.name.text);
    if (!bindings || !ts.isNamedImports(bindings)) continue;
    for (const specifier of bindings.elements) {
      const table = drizzle.get((specifier.propertyName ?? specifier.name).text);
      if (table && !specifier.isTypeOnly) {
        imported.set(table, specifier);
        local.set(specifier.name.text, [table]);
      }
    }
  }
  // A table expression: an imported table, a choice between them, or a local constant holding one.
  const tablesOf = (node) => {
    if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node)) return tablesOf(node.expression);
    if (ts.isConditionalExpression(node)) return [...new Set([node.whenTrue, node.whenFalse].flatMap(tablesOf))];
    if (ts.isIdentifier(node)) return local.get(node.text) ?? [];
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isIdentifier(node.expression) &&
      namespaces.has(node.expression.text)
    ) {
      const table = drizzle.get(node.name.text);
      return table ? [table] : [];
    }
    return [];
  };
  // Local constants holding a table object (`const table = kind === "merchant" ? merchants : agents`).
  const visit = (node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer) {
      const held = tablesOf(node.initializer);
      if (held.length > 0) local.set(node.name.text, held);
    }
    ts.forEachChild(node, visit);
  };
  if (local.size > 0 || namespaces.size > 0) visit(source);
  return { imported, namespaces, tablesOf };
}

/**
 * The tables a string or template literal names after FROM, JOIN, INTO or UPDATE, each with the
 * offset in the file where it is named. A `${x}` there names the tables among the literals x resolves to.
 */
function sqlTables(node, source, tables) {
  const start = node.getStart(source);
  let text = node.getText(source);
  const spans = new Map();
  if (ts.isTemplateExpression(node)) {
    let before = node.head;
    for (const span of node.templateSpans) {
      // `${x}` becomes as many private-use characters (U+E000), so offsets stay the file's own.
      const from = before.getEnd() - 2 - start;
      const to = span.literal.getStart(source) + 1 - start;
      before = span.literal;
      text = text.slice(0, from) + "\uE000".repeat(to - from) + text.slice(to);
      spans.set(from, span.expression);
    }
  }
  const named = [];
  if (!SQL_SHAPE.test(text)) return named;
  for (const m of text.matchAll(SQL_TABLE)) {
    const offset = m.index + m[0].length - m[2].length;
    const candidates = m[2].startsWith("\uE000") ? literalsOf(spans.get(offset), source) : [m[2]];
    for (const name of candidates)
      if (tables.has(name.toLowerCase())) named.push({ table: name.toLowerCase(), offset: start + offset });
  }
  return named;
}

/** The string literals an expression can be: itself, a choice between literals, or a local constant's. */
function literalsOf(expression, source, seen = new Set()) {
  if (!expression) return [];
  if (ts.isStringLiteralLike(expression)) return [expression.text];
  if (ts.isParenthesizedExpression(expression)) return literalsOf(expression.expression, source, seen);
  if (ts.isConditionalExpression(expression))
    return [expression.whenTrue, expression.whenFalse].flatMap((e) => literalsOf(e, source, seen));
  if (ts.isAsExpression(expression)) return literalsOf(expression.expression, source, seen);
  if (ts.isObjectLiteralExpression(expression))
    return expression.properties.flatMap((p) =>
      ts.isPropertyAssignment(p) ? literalsOf(p.initializer, source, seen) : [],
    );
  // TABLE[kind] and TABLE.agent: the values of the constant TABLE.
  if (ts.isElementAccessExpression(expression) || ts.isPropertyAccessExpression(expression))
    return literalsOf(expression.expression, source, seen);
  if (ts.isIdentifier(expression) && !seen.has(expression.text)) {
    seen.add(expression.text);
    return declarationsOf(expression.text, source).flatMap((init) => literalsOf(init, source, seen));
  }
  return [];
}

function declarationsOf(name, source) {
  const inits = [];
  const visit = (node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.name.text === name && node.initializer)
      inits.push(node.initializer);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return inits;
}

/**
 * How each file outside src/db and src/ledger reaches D1: `prepare` (raw `.prepare(` calls),
 * `sqlStatement` (calls), `literal` (`{ sql, params }` objects written out), `helpers` (guard, guards,
 * appendRows: SQL the file writes into the statement helpers of src/db) and `drizzle` (queries built
 * on a drizzle table: `.from(t)`, `.insert(t)`, `.update(t)`, `.delete(t)`, `db.query.t`). Also the
 * drizzle tables no file of src/ queries through drizzle.
 */
export function accessStyles(root) {
  const { migrations, drizzle } = tablesOf(root);
  const tables = new Set([...migrations, ...drizzle.values()]);
  const files = {};
  const drizzleQueried = new Set();
  for (const full of sourceFiles(root)) {
    const file = path.relative(root, full).split(path.sep).join("/");
    const uses = usesIn(root, full, tables, drizzle).filter(
      (u) => u.kind.startsWith("drizzle-") && u.kind !== "drizzle-import",
    );
    for (const use of uses) drizzleQueried.add(use.table);
    if (EVERYWHERE.includes(folderOf(file))) continue;
    const counts = { prepare: 0, sqlStatement: 0, literal: 0, helpers: 0, drizzle: uses.length };
    const source = parse(full);
    const visit = (node) => {
      if (ts.isCallExpression(node)) {
        const callee = node.expression;
        if (ts.isPropertyAccessExpression(callee) && callee.name.text === "prepare") counts.prepare++;
        if (ts.isIdentifier(callee) && callee.text === "sqlStatement") counts.sqlStatement++;
        if (ts.isIdentifier(callee) && ["guard", "guards", "appendRows"].includes(callee.text)) counts.helpers++;
      }
      if (ts.isObjectLiteralExpression(node)) {
        const keys = node.properties.map((p) => p.name?.getText(source));
        if (keys.includes("sql") && keys.includes("params")) counts.literal++;
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    if (Object.values(counts).some((n) => n > 0)) files[file] = counts;
  }
  const neverDrizzle = [...drizzle.values()].filter((t) => !drizzleQueried.has(t)).sort();
  return { files, neverDrizzle };
}

function printViolations(root) {
  const violations = tableViolations(root);
  const byFile = new Map();
  for (const v of violations) byFile.set(v.file, [...(byFile.get(v.file) ?? []), v]);
  for (const [file, uses] of byFile) {
    console.log(file);
    for (const u of uses)
      console.log(`  ${u.line}\t${u.table}\t${u.kind}\t(owner: ${[OWNERS[u.table]].flat().join(", ")})`);
  }
  const count = (key) => {
    const files = new Map();
    for (const v of violations) files.set(key(v), new Set([...(files.get(key(v)) ?? []), v.file]));
    return [...files]
      .map(([k, f]) => [k, f.size, violations.filter((v) => key(v) === k).length])
      .sort((a, b) => b[1] - a[1] || b[2] - a[2]);
  };
  console.log(`\n${violations.length} uses in ${byFile.size} files\n\nby table (files, uses):`);
  for (const [table, files, uses] of count((v) => v.table)) console.log(`  ${table}\t${files}\t${uses}`);
  console.log("\nby folder (files, uses):");
  for (const [folder, files, uses] of count((v) => folderOf(v.file))) console.log(`  ${folder}\t${files}\t${uses}`);
}

function printStyles(root) {
  const { files, neverDrizzle } = accessStyles(root);
  console.log("file\tprepare\tsqlStatement\tliteral\thelpers\tdrizzle");
  for (const [file, c] of Object.entries(files))
    console.log(`${file}\t${c.prepare}\t${c.sqlStatement}\t${c.literal}\t${c.helpers}\t${c.drizzle}`);
  const rows = Object.values(files);
  console.log("\nstyle\tfiles\tsites");
  for (const style of ["prepare", "sqlStatement", "literal", "helpers", "drizzle"])
    console.log(`${style}\t${rows.filter((c) => c[style] > 0).length}\t${rows.reduce((n, c) => n + c[style], 0)}`);
  console.log(`\ndrizzle tables never queried through drizzle (${neverDrizzle.length}): ${neverDrizzle.join(", ")}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.includes("--styles")) printStyles(process.cwd());
  else printViolations(process.cwd());
}
