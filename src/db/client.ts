import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema";

export type Db = ReturnType<typeof dbOf>;

export const dbOf = (d1: D1Database) => drizzle(d1, { schema });
