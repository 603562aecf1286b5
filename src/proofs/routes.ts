import { Hono } from "hono";
import type { AppEnv } from "../auth/app-env";
import { publishedJwks } from "./keys";

export const proofRoutes = new Hono<AppEnv>().get("/.well-known/jwks.json", async (c) => {
  // Public and the same for everyone: caches may keep it a while, but not past a rotation's notice.
  c.header("cache-control", "public, max-age=300");
  return c.json(await publishedJwks(c.get("settings").proofs));
});
