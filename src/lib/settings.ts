import type { z } from "zod";

// Helpers for the settings groups, which src/settings.ts composes. Settings arrive as the Worker's
// vars and secrets: each one a string, or absent.

/** The vars a group of settings reads, by the names of its schema's fields. */
export type VarsOf<Shape> = { [K in keyof Shape]?: string };

export type Environment = "development" | "test" | "production";

export const isHttps = (url: string) => url.startsWith("https://");

/** A zod error as one line: `FIELD message; FIELD message`. */
export const issuesOf = (error: z.ZodError) => error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ");
