// Types of long-functions.mjs for the TypeScript that imports it (test/house/sizes.test.ts).
export interface LongFunction {
  file: string;
  line: number;
  lines: number;
  name: string;
}
export declare function longFunctions(root: string, limit?: number): LongFunction[];
