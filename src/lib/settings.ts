import { z } from "zod";

// Helpers for the settings groups, which src/settings.ts composes. Settings arrive as the Worker's
// vars and secrets: each one a string, or absent.

/** The vars a group of settings reads, by the names of its schema's fields. */
export type VarsOf<Shape> = { [K in keyof Shape]?: string };

export type Environment = "development" | "test" | "production";

export const isHttps = (url: string) => url.startsWith("https://");

/** A zod error as one line: `FIELD message; FIELD message`. */
export const issuesOf = (error: z.ZodError) => error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ");

/**
 * A whole number of days (or other units) written in decimal digits, for a var that deletes or moves
 * data: an empty value, `0x10` or `1e2` is refused rather than read as 0, 16 or 100, as
 * `z.coerce.number()` would. Absent, it takes `fallback`.
 */
export const wholeNumberVar = ({ min = 0, max, fallback }: { min?: number; max: number; fallback: number }) =>
  z
    .string()
    .regex(/^\d+$/, "expected a whole number in decimal digits")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .default(fallback);
