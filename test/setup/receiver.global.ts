import { createServer, type IncomingMessage, type Server } from "node:http";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import type { TestProject } from "vitest/node";

/**
 * A real HTTP webhook receiver on 127.0.0.1 for the Worker (inside workerd) to
 * deliver to. Its behaviour is chosen by the first word of the hook's name:
 *   ok-*      answers 200
 *   fail2-*   answers 500 twice, then 200
 *   fail-*    always 500
 *   slow-*    answers after 3 s (past the test timeout of 2 s)
 *   paced-*   answers 200 after 1.2 s (within the test timeout of 2 s)
 *   redirect-* answers 302 to an ok hook (never followed)
 *   gone-*    answers 410 Gone
 * GET /received/<name> lists what arrived: { headers, body } with the raw body.
 * GET /inflight/<name> says how many requests to the hook are unanswered now and at most ever:
 * { now, max }, so a test can count how many deliveries were under way at once.
 * GET /access/certs serves a Cloudflare Access style key set (JWKS) whose
 * private key the tests get as `accessPrivateJwk`, to sign Access assertions.
 * /resource/<kind>?name=<name> stands in for the resources the MCP tool pay_x402_resource fetches
 * (each request is recorded under <name>, see GET /received/<name>):
 *   paywall   402 with `terms` (base64 JSON of the terms: in PAYMENT-REQUIRED for version 2, as the
 *             body for `v=1`) until a request carries X-PAYMENT or PAYMENT-SIGNATURE, then 200
 *             { paidWith, method, body }; with `forever=1`, 402 every time
 *   redirect  `status` (default 302) to `to`
 *   endless   200 text, 16 KB chunks of "a" until the client stops reading (at most 64 MB)
 *   hang      never answers
 */
interface Received {
  headers: Record<string, string>;
  body: string;
  receivedAt: number;
}

declare module "vitest" {
  export interface ProvidedContext {
    receiverUrl: string;
    accessPrivateJwk: JWK;
  }
}

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });

let server: Server | undefined;

/**
 * A DNS-over-HTTPS resolver (JSON form) for the send-time SSRF guard, with
 * names that resolve where a webhook must never go, one that is public, and
 * one whose resolver fails. Every other name is NXDOMAIN.
 */
const DNS_RECORDS: Record<string, { A?: string[]; AAAA?: string[] } | "fail"> = {
  "rebind.example.test": { A: ["93.184.216.34", "10.1.2.3"] },
  "loopback.example.test": { A: ["127.0.0.1"] },
  "metadata.example.test": { A: ["169.254.169.254"] },
  "mapped.example.test": { AAAA: ["::ffff:127.0.0.1"] },
  "ula.example.test": { AAAA: ["fd00::1"] },
  "public.example.test": { A: ["93.184.216.34"], AAAA: ["2606:2800:220:1:248:1893:25c8:1946"] },
  "broken.example.test": "fail",
};

function answerDns(url: URL, res: import("node:http").ServerResponse) {
  const name = (url.searchParams.get("name") ?? "").toLowerCase();
  const type = url.searchParams.get("type") === "AAAA" ? "AAAA" : "A";
  const record = DNS_RECORDS[name];
  if (record === "fail") {
    res.writeHead(502).end();
    return;
  }
  const data = record?.[type] ?? [];
  res.writeHead(200, { "content-type": "application/dns-json" });
  res.end(
    JSON.stringify({
      Status: record ? 0 : 3,
      Answer: data.map((address) => ({ name, type: type === "A" ? 1 : 28, TTL: 30, data: address })),
    }),
  );
}

/** The stand-ins for what the MCP tool pay_x402_resource fetches (see the comment at the top). */
async function answerResource(
  url: URL,
  req: IncomingMessage,
  res: import("node:http").ServerResponse,
  received: Map<string, Received[]>,
) {
  const kind = url.pathname.slice("/resource/".length);
  const body = await readBody(req);
  const name = url.searchParams.get("name") ?? "";
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
  received.set(name, [...(received.get(name) ?? []), { headers, body, receivedAt: Date.now() }]);
  if (kind === "paywall") {
    const terms = url.searchParams.get("terms") ?? "";
    const paidWith = headers["payment-signature"] ?? headers["x-payment"];
    const paidRedirect = url.searchParams.get("paidRedirect");
    if (paidWith && paidRedirect !== null) {
      // A paywall that takes the payment, then sends the paid request on elsewhere.
      res.writeHead(302, { location: paidRedirect }).end();
    } else if (paidWith && url.searchParams.get("forever") !== "1") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ paidWith, method: req.method, body }));
    } else if (url.searchParams.get("v") === "1") {
      res.writeHead(402, { "content-type": "application/json" });
      res.end(Buffer.from(terms, "base64").toString("utf8"));
    } else {
      res.writeHead(402, { "content-type": "application/json", "payment-required": terms });
      res.end("{}");
    }
  } else if (kind === "redirect") {
    res.writeHead(Number(url.searchParams.get("status") ?? 302), { location: url.searchParams.get("to") ?? "/" }).end();
  } else if (kind === "endless") {
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    const chunk = Buffer.alloc(16 * 1024, "a");
    let sent = 0;
    const write = () => {
      while (sent < 64 * 1024 * 1024 && !res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", write);
      }
      res.end();
    };
    write();
  } else if (kind !== "hang") {
    res.writeHead(404).end();
  }
}

export async function setup(project: TestProject) {
  const received = new Map<string, Received[]>();
  const inFlight = new Map<string, { now: number; max: number }>();
  const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid: "test-access-key", alg: "RS256", use: "sig" };
  project.provide("accessPrivateJwk", { ...(await exportJWK(privateKey)), kid: "test-access-key", alg: "RS256" });
  server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://receiver");
    if (req.method === "GET" && url.pathname === "/access/certs") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ keys: [publicJwk] }));
      return;
    }
    if (req.method === "GET" && url.pathname === "/dns-query") {
      answerDns(url, res);
      return;
    }
    if (url.pathname.startsWith("/resource/")) {
      await answerResource(url, req, res, received);
      return;
    }
    const [, kind, name = ""] = url.pathname.split("/");
    if (req.method === "GET" && kind === "received") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(received.get(name) ?? []));
      return;
    }
    if (req.method === "GET" && kind === "inflight") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(inFlight.get(name) ?? { now: 0, max: 0 }));
      return;
    }
    if (req.method !== "POST" || kind !== "hooks") {
      res.writeHead(404).end();
      return;
    }
    const counts = inFlight.get(name) ?? { now: 0, max: 0 };
    inFlight.set(name, counts);
    counts.now++;
    counts.max = Math.max(counts.max, counts.now);
    res.on("close", () => counts.now--);
    const body = await readBody(req);
    const list = received.get(name) ?? [];
    list.push({
      headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
      body,
      receivedAt: Date.now(),
    });
    received.set(name, list);
    const behaviour = name.split("-")[0];
    if (behaviour === "fail2") res.writeHead(list.length <= 2 ? 500 : 200).end();
    else if (behaviour === "fail") res.writeHead(500).end("receiver error");
    else if (behaviour === "slow") setTimeout(() => res.writeHead(200).end(), 3_000);
    else if (behaviour === "paced") setTimeout(() => res.writeHead(200).end(), 1_200);
    else if (behaviour === "redirect") res.writeHead(302, { location: "/hooks/ok-redirected" }).end();
    else if (behaviour === "gone") res.writeHead(410).end();
    else res.writeHead(200).end("ok");
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("receiver did not bind");
  project.provide("receiverUrl", `http://127.0.0.1:${address.port}`);
}

export async function teardown() {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
}
