import { z } from "zod";

// Helpers for the settings groups, which src/config/settings.ts composes. Settings arrive as the Worker's
// vars and secrets: each one a string, or absent.

/** The vars a group of settings reads, by the names of its schema's fields. */
export type VarsOf<Shape> = { [K in keyof Shape]?: string };

export type Environment = "development" | "test" | "production";

export const isHttps = (url: string) => url.startsWith("https://");

/** A zod error as one line: `FIELD message; FIELD message`. */
export const issuesOf = (error: z.ZodError) => error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ");

/** One whole number in decimal digits, within [min, max]: the parser every numeric setting goes through. */
const wholeNumber = ({ min = 0, max }: { min?: number; max: number }) =>
  z
    .string()
    .regex(/^\d+$/, "expected a whole number in decimal digits")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/**
 * A whole number (of days, seconds, confirmations...) written in decimal digits: an empty value,
 * ` 5 `, `0x10`, `1e2` or `1.5` is refused rather than read as 0, 5, 16, 100 or 1.5, as
 * `z.coerce.number()` would, so an operator's typo stops the service instead of running it on
 * another number. Absent, it takes `fallback`.
 */
export const wholeNumberVar = ({ min = 0, max, fallback }: { min?: number; max: number; fallback: number }) =>
  wholeNumber({ min, max }).default(fallback);

/**
 * Whole numbers in decimal digits separated by commas (spaces around a comma allowed), each within
 * [min, max], `entries.min` to `entries.max` of them: an empty value or entry (`10,,30`, a trailing
 * comma), `0x10` or `1e2` is refused rather than read as 0, 16 or 100. Absent, it takes `fallback`,
 * which is parsed like a set value.
 */
export const wholeNumberListVar = ({
  min = 0,
  max,
  entries,
  fallback,
}: {
  min?: number;
  max: number;
  entries: { min: number; max: number };
  fallback: string;
}) =>
  z
    .string()
    .default(fallback)
    .transform((text) => text.split(",").map((entry) => entry.trim()))
    .pipe(z.array(wholeNumber({ min, max })).min(entries.min).max(entries.max));
