import { env, exports } from "cloudflare:workers";
import { signConsoleToken } from "../../src/auth/jwt";

export const BASE = "http://service.test";

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

/** What `api` and `callWorker` take besides the method and path. */
export interface CallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Builds the request, hands it to `dispatch`, and reads the answer (JSON parsed when it says it is JSON). */
export async function requestThrough<T = any>(
  dispatch: (request: Request) => Promise<Response>,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    headers["content-type"] ??= "application/json";
    body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
  }
  // redirect: manual, so a test sees the redirect itself (the loopback binding would follow it).
  const response = await dispatch(new Request(`${BASE}${path}`, { method, headers, body, redirect: "manual" }));
  const text = await response.text();
  let parsed: unknown = text;
  if ((response.headers.get("content-type") ?? "").includes("application/json")) parsed = JSON.parse(text);
  return { status: response.status, body: parsed as T, headers: response.headers, text };
}

/** How `api` hands a request to the Worker: the harness's dispatch, unless the file chose another (`useDispatch`). */
let dispatch = (request: Request): Promise<Response> => exports.default.fetch(request);

/** Every `api` call of the calling test file goes through `to` (test/helpers/direct.ts). */
export function useDispatch(to: (request: Request) => Promise<Response>) {
  dispatch = to;
}

/** Calls the Worker's own fetch handler inside workerd, as a client would. */
export const api = <T = any>(method: string, path: string, options: CallOptions = {}): Promise<ApiResponse<T>> =>
  requestThrough<T>((request) => dispatch(request), method, path, options);

export const OPS_EMAIL = "ops@example.com";

/** A console session token for an allowed console user. */
export async function consoleToken(email = OPS_EMAIL): Promise<string> {
  return (await signConsoleToken(env.CONSOLE_SESSION_SECRET!, email)).token;
}
