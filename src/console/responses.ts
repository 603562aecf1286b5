import { z } from "zod";
import { named, Timestamp } from "../lib/api-shapes";

/** Response bodies: Console sign-in and users. */

export const EmailCodeSent = named("EmailCodeSent", z.strictObject({ sent: z.literal(true) }));

export const ConsoleSession = named(
  "ConsoleSession",
  z.strictObject({ token: z.string().describe("A console session JWT (HS256, aud `console`)."), expiresAt: Timestamp }),
);

export const SignedOut = named("SignedOut", z.strictObject({ signedOut: z.literal(true) }));

export const ConsoleUser = named(
  "ConsoleUser",
  z.strictObject({
    email: z.string(),
    source: z.enum(["configured", "console"]),
    addedBy: z.string().nullable(),
    createdAt: Timestamp.nullable(),
  }),
);

export const ConsoleUserList = named("ConsoleUserList", z.strictObject({ users: z.array(ConsoleUser) }));

export const ConsoleUserAdded = named(
  "ConsoleUserAdded",
  z.strictObject({ user: z.strictObject({ email: z.string(), addedBy: z.string(), createdAt: Timestamp }) }),
);
