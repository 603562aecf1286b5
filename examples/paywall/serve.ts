// Serves a fetch handler (a Hono app's `fetch`) with Node's own HTTP server: the example needs no
// server package beyond what the repository installs.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export interface Served {
  url: string;
  close: () => Promise<void>;
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Listens on `port` of 127.0.0.1 (0: any free one) and resolves once it does. */
export async function serve(handler: (request: Request) => Response | Promise<Response>, port = 0): Promise<Served> {
  const server = createServer(async (req, res) => {
    try {
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value])
          headers.append(name, item);
      }
      const hasBody = req.method !== "GET" && req.method !== "HEAD";
      const request = new Request(`http://${req.headers.host ?? "127.0.0.1"}${req.url ?? "/"}`, {
        method: req.method,
        headers,
        body: hasBody ? await bodyOf(req) : undefined,
      });
      const response = await handler(request);
      res.writeHead(response.status, [...response.headers].flat());
      res.end(Buffer.from(await response.arrayBuffer()));
    } catch (error) {
      console.error(error);
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "internal_error" }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
