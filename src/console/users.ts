import type { Db } from "../db/client";
import { consoleUsers } from "../db/schema";

export type AddedConsoleUser = typeof consoleUsers.$inferSelect;

/** The console users added from the console (the configured CONSOLE_USERS are in the settings). */
export const listAddedConsoleUsers = (db: Db) => db.select().from(consoleUsers).all();

/** Lets another e-mail sign in; adding one already there changes nothing. */
export const addConsoleUser = (db: Db, user: AddedConsoleUser) =>
  db.insert(consoleUsers).values(user).onConflictDoNothing();
