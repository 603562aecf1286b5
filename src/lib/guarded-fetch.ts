import { checkDestination } from "./dns-guard";
import { currentInvocation } from "./invocation";

/*
 * A fetch of a URL someone else named (an agent's MCP tool), bounded the way a webhook POST is: every
 * hop must be a URL a webhook may reach (./url-guard.ts, and ./dns-guard.ts at send time), redirects
 * are followed by hand so each target is judged before anything is sent to it, the body is read as a
 * stream and cut at a cap, and one deadline covers the hops and the body.
 */

/** The longest body kept (bytes); the rest is never read: the stream is cancelled. */
export const MAX_FETCHED_BYTES = 256 * 1024;
/** Redirects followed before giving up: enough for http→https and a moved path, not a chain. */
export const MAX_REDIRECTS = 3;
/** One send (its redirects and its body) ends after this; a paid request waits for its settlement. */
export const FETCH_TIMEOUT_MS = 30_000;

export interface FetchGuard {
  environment: "development" | "test" | "production";
  webhookDnsResolverUrl: string | null;
  webhookTimeoutMs: number;
}

export interface GuardedRequest {
  url: string;
  method: string;
  headers: Headers;
  body: string | null;
}

export type Fetched =
  | {
      ok: true;
      /** The request the answer is to (the last hop): a paid request goes there again. */
      request: GuardedRequest;
      status: number;
      headers: Headers;
      /** The body's first MAX_FETCHED_BYTES bytes, as UTF-8 text (an incomplete last character dropped). */
      body: string;
      truncated: boolean;
    }
  /** Refused before a hop was sent (`reason` from the guard), too many redirects, a timeout or a network failure. */
  | { ok: false; url: string; reason: string };

/** Headers that name who asks or what was paid: never carried to another origin by a redirect. */
const ORIGIN_BOUND = ["authorization", "cookie", "proxy-authorization", "x-payment", "payment-signature"];

/** Reads at most `max` bytes of `stream`, then cancels it: a body of any length costs at most `max` bytes. */
export async function readCapped(
  stream: ReadableStream<Uint8Array> | null,
  max = MAX_FETCHED_BYTES,
): Promise<{ text: string; truncated: boolean }> {
  if (!stream) return { text: "", truncated: false };
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let kept = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text: text + decoder.decode(), truncated: false };
      const room = max - kept;
      if (value.byteLength > room) {
        // `stream: true` holds back a character cut in half instead of rendering it as U+FFFD.
        text += decoder.decode(value.subarray(0, room), { stream: true });
        return { text, truncated: true };
      }
      kept += value.byteLength;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

const isRedirect = (status: number) => [301, 302, 303, 307, 308].includes(status);

/** The request for the next hop, as fetch's own redirect rules make it (303, and 301/302 of a POST, become GET). */
function nextHop(request: GuardedRequest, status: number, target: URL): GuardedRequest {
  const headers = new Headers(request.headers);
  if (target.origin !== new URL(request.url).origin) for (const name of ORIGIN_BOUND) headers.delete(name);
  const toGet =
    status === 303 ? request.method !== "HEAD" : (status === 301 || status === 302) && request.method === "POST";
  if (!toGet) return { ...request, url: target.href, headers };
  headers.delete("content-type");
  return { url: target.href, method: "GET", headers, body: null };
}

/**
 * Sends `request`, following at most MAX_REDIRECTS redirects, each target judged before it is sent
 * to; answers the last response with its body read up to the cap. Never throws for what the far end
 * does: a refusal, a timeout or a failed connection is `{ ok: false }`.
 */
export async function guardedFetch(
  request: GuardedRequest,
  guard: FetchGuard,
  timeoutMs = FETCH_TIMEOUT_MS,
): Promise<Fetched> {
  const signal = AbortSignal.timeout(timeoutMs);
  let hop = request;
  for (let redirects = 0; ; redirects++) {
    const verdict = await checkDestination(hop.url, guard);
    if (!verdict.ok) return { ok: false, url: hop.url, reason: verdict.reason };
    try {
      const sent = hop;
      const { response, location, read } = await currentInvocation().withSlot(async () => {
        const response = await fetch(sent.url, {
          method: sent.method,
          headers: sent.headers,
          body: sent.body,
          redirect: "manual",
          signal,
        });
        const location = isRedirect(response.status) ? response.headers.get("location") : null;
        if (location !== null) {
          // A redirect's own body is not wanted: dropped unread.
          await response.body?.cancel();
          return { response, location, read: null };
        }
        return { response, location, read: await readCapped(response.body) };
      });
      if (read) {
        const { status, headers } = response;
        return { ok: true, request: sent, status, headers, body: read.text, truncated: read.truncated };
      }
      if (redirects === MAX_REDIRECTS) return { ok: false, url: sent.url, reason: "too_many_redirects" };
      hop = nextHop(sent, response.status, new URL(location ?? "", sent.url));
    } catch (error) {
      const reason = signal.aborted
        ? "timeout"
        : `fetch_failed: ${String(error instanceof Error ? error.message : error).slice(0, 100)}`;
      return { ok: false, url: hop.url, reason };
    }
  }
}
