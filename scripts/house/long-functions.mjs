// Lists functions of src/ longer than a limit (default 80 lines), longest first: `node scripts/house/long-functions.mjs [limit]`.
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";

export function longFunctions(root, limit = 80) {
  const found = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith(".d.ts")) scan(full);
    }
  };
  const scan = (file) => {
    const text = fs.readFileSync(file, "utf8");
    const source = ts.createSourceFile(
      file,
      text,
      ts.ScriptTarget.Latest,
      true,
      file.endsWith("x") ? ts.ScriptKind.TSX : ts.ScriptKind.TS,
    );
    const visit = (node) => {
      if (ts.isFunctionLike(node) && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = end - start + 1;
        if (lines > limit) found.push({ file: path.relative(root, file), line: start + 1, lines, name: nameOf(node) });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  };
  walk(path.join(root, "src"));
  return found.sort((a, b) => b.lines - a.lines);
}

function nameOf(node) {
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  return "(anonymous)";
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const limit = Number(process.argv[2] ?? 80);
  for (const f of longFunctions(process.cwd(), limit)) console.log(`${f.lines}\t${f.file}:${f.line}\t${f.name}`);
}
