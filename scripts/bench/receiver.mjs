// A healthy local webhook receiver for the fan-out scenario: it verifies every signature (as
// client/src/webhooks.ts does: HMAC-SHA256 over "<t>.<raw body>", constant-time compare),
// answers 200 at once, and records when each event arrived.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

function verified(secret, header, raw) {
  if (typeof header !== "string") return false;
  const parts = header.split(",").map((p) => p.split("="));
  const t = parts.find(([k]) => k === "t")?.[1];
  if (!t) return false;
  const expected = Buffer.from(createHmac("sha256", secret).update(`${t}.${raw}`).digest("hex"));
  return parts.some(
    ([k, v]) => k === "v1" && v && v.length === expected.length && timingSafeEqual(Buffer.from(v), expected),
  );
}

/**
 * @returns {Promise<{ url: string, setSecret: (s: string) => void, events: Map<string, { type: string, createdAt: number, receivedAt: number }>,
 *   stats: { posts: number, badSignatures: number, duplicates: number }, close: () => Promise<void> }>}
 */
export async function startReceiver() {
  let secret = "";
  const events = new Map();
  const stats = { posts: 0, badSignatures: 0, duplicates: 0 };
  const server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => (raw += chunk));
    req.on("end", () => {
      const receivedAt = Date.now();
      stats.posts++;
      if (!verified(secret, req.headers["x-service-signature"], raw)) {
        stats.badSignatures++;
        res.writeHead(401).end();
        return;
      }
      const event = JSON.parse(raw);
      // Deliveries are at least once: the envelope id tells a duplicate.
      if (events.has(event.id)) stats.duplicates++;
      else events.set(event.id, { type: event.type, createdAt: Date.parse(event.createdAt), receivedAt });
      res.writeHead(200).end();
    });
  });
  // Keep-alive sockets would hold close() open.
  server.keepAliveTimeout = 1000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/hook`,
    setSecret: (s) => (secret = s),
    events,
    stats,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
