import { inject } from "vitest";
import { api, consoleToken } from "./api";

export const receiverUrl = () => inject("receiverUrl");

export interface ReceivedDelivery {
  headers: Record<string, string>;
  body: string;
  receivedAt: number;
}

/** What the local receiver got on hook `name`. */
export async function received(name: string): Promise<ReceivedDelivery[]> {
  const res = await fetch(`${receiverUrl()}/received/${name}`);
  return (await res.json()) as ReceivedDelivery[];
}

/** Polls until `check` passes on what hook `name` received (the queue delivers asynchronously). */
export async function waitForReceived(
  name: string,
  check: (list: ReceivedDelivery[]) => boolean,
  timeoutMs = 20_000,
): Promise<ReceivedDelivery[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await received(name);
    if (check(list)) return list;
    if (Date.now() > deadline) throw new Error(`hook ${name}: condition not met; received ${list.length}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function registerEndpoint(name: string, options: { events?: string[]; merchantId?: string } = {}) {
  const res = await api("POST", "/settings/webhooks", {
    token: await consoleToken(),
    body: { url: `${receiverUrl()}/hooks/${name}`, ...options },
  });
  if (res.status !== 201) throw new Error(`registerEndpoint: ${res.status} ${res.text}`);
  return res.body as { id: string; url: string; events: string[]; secret: string };
}
