// Types of table-owners.mjs for the TypeScript that imports it (test/house/table-owners.test.ts).
export interface TableUse {
  file: string;
  table: string;
  line: number;
  kind: string;
}
export interface StyleCounts {
  prepare: number;
  sqlStatement: number;
  literal: number;
  helpers: number;
  drizzle: number;
}
export declare const OWNERS: Record<string, string | string[]>;
export declare const EVERYWHERE: string[];
export declare const TABLE_ARGUMENTS: Record<string, number>;
export declare function folderOf(file: string): string;
export declare function mayUse(folder: string, table: string): boolean;
export declare function tablesOf(root: string): { migrations: string[]; drizzle: Map<string, string> };
export declare function tableUses(root: string): TableUse[];
export declare function tableViolations(root: string): TableUse[];
export declare function violationsByFile(violations: TableUse[]): Record<string, string[]>;
export declare function accessStyles(root: string): { files: Record<string, StyleCounts>; neverDrizzle: string[] };
