import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema";

export type Db = ReturnType<typeof drizzle<typeof schema>>;

/**
 * One drizzle client per D1 binding (the binding is the same object for every request of an
 * isolate): building one walks the whole schema's relations, which cost more CPU than a payment's
 * own queries when it was done per request.
 */
const clients = new WeakMap<D1Database, Db>();

export function dbOf(d1: D1Database): Db {
  let db = clients.get(d1);
  if (!db) {
    db = drizzle(d1, { schema });
    clients.set(d1, db);
  }
  return db;
}
