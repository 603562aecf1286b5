import { Scalar } from "@scalar/hono-api-reference";
import { Hono } from "hono";
import type { AppEnv } from "../auth/app-env";
import { openApiDocument } from "./document";

/**
 * Where the reference page loads Scalar's standalone bundle from: this
 * deployment's static assets (wrangler.toml `[assets]`), never a CDN. The
 * asset layer answers that one path before the Worker runs, so it is in no
 * route table.
 */
export const SCALAR_SCRIPT_PATH = "/standalone.js";

/**
 * The page may load nothing from another origin: the script and the document
 * come from this deployment, fonts are the system's, and Scalar's telemetry, MCP
 * and hosted-client features are off. The CSP makes the browser enforce it.
 */
const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "frame-ancestors 'none'",
].join("; ");

const reference = Scalar({
  url: "/openapi.json",
  cdn: SCALAR_SCRIPT_PATH,
  pageTitle: "agent-pay API reference",
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  mcp: { disabled: true },
  agent: { disabled: true },
  defaultOpenFirstTag: true,
});

/** The page needs no bindings or variables of ours, so it lives on a plain Hono app (the middleware's own type). */
const referencePage = new Hono().get("/docs", async (c, next) => {
  c.header("Content-Security-Policy", DOCS_CSP);
  return reference(c, next);
});

export const openApiRoutes = new Hono<AppEnv>()
  .get("/openapi.json", (c) => c.json(openApiDocument()))
  .route("/", referencePage);
