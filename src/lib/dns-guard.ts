import { currentInvocation } from "./invocation";
import { checkPublicUrl, ipv4Octets, ipv6Groups, isForbiddenIpv4, isForbiddenIpv6 } from "./url-guard";

/**
 * The send-time half of the SSRF guard (webhook POSTs and the MCP tool's
 * fetches). A webhook URL is judged when it is
 * registered, but a DNS name can later resolve to a private address (DNS
 * rebinding, or a name like `127.0.0.1.nip.io`). Before each POST the host is
 * resolved over DNS-over-HTTPS (RFC 8484 JSON form, as Cloudflare's and
 * Google's resolvers answer it) and the POST is refused if any A or AAAA answer
 * is an address we never call. Fails closed: no answer, no POST.
 */
export type DestinationVerdict = { ok: true } | { ok: false; reason: string };

const DNS_TYPES = { A: 1, AAAA: 28 } as const;
/** Answers are cached per isolate for their TTL, at most a minute. */
const MAX_CACHE_MS = 60_000;
const cache = new Map<string, { addresses: string[]; until: number }>();

interface DohAnswer {
  Status?: number;
  Answer?: { type: number; data: string; TTL?: number }[];
}

async function lookup(
  resolverUrl: string,
  name: string,
  type: keyof typeof DNS_TYPES,
  timeoutMs: number,
): Promise<{ addresses: string[]; ttlMs: number }> {
  const url = new URL(resolverUrl);
  url.searchParams.set("name", name);
  url.searchParams.set("type", type);
  // In one of the invocation's connection slots, its timeout started when it is sent.
  const body = await currentInvocation().withSlot(async () => {
    const response = await fetch(url, {
      headers: { accept: "application/dns-json" },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) throw new Error(`resolver answered ${response.status}`);
    return (await response.json()) as DohAnswer;
  });
  // NOERROR (0) with answers or none, NXDOMAIN (3): anything else is a failure we do not guess past.
  if (body.Status !== 0 && body.Status !== 3) throw new Error(`resolver status ${String(body.Status)}`);
  const answers = (body.Answer ?? []).filter((a) => a.type === DNS_TYPES[type]);
  const ttl = Math.min(...answers.map((a) => (a.TTL ?? 0) * 1000), MAX_CACHE_MS);
  return { addresses: answers.map((a) => a.data), ttlMs: Number.isFinite(ttl) ? ttl : 0 };
}

/** The A and AAAA addresses of `host`, through the resolver (cached for their TTL). */
export async function resolveHost(
  resolverUrl: string,
  host: string,
  timeoutMs: number,
  now = Date.now(),
): Promise<string[]> {
  const key = `${resolverUrl} ${host}`;
  const hit = cache.get(key);
  if (hit && hit.until > now) return hit.addresses;
  const [a, aaaa] = await Promise.all([
    lookup(resolverUrl, host, "A", timeoutMs),
    lookup(resolverUrl, host, "AAAA", timeoutMs),
  ]);
  const addresses = [...a.addresses, ...aaaa.addresses];
  cache.set(key, { addresses, until: now + Math.min(a.ttlMs, aaaa.ttlMs) });
  return addresses;
}

/** True if the resolved address is one the service never calls. Unparseable answers count as forbidden. */
export function isForbiddenAddress(address: string): boolean {
  const v4 = ipv4Octets(address);
  if (v4) return isForbiddenIpv4(v4);
  const v6 = ipv6Groups(address);
  return v6 === null || isForbiddenIpv6(v6);
}

/**
 * Judges a URL right before a request is sent to it (a stored webhook URL, a
 * fetched resource and each of its redirects): the registration rules
 * again (settings may have changed), then, for a DNS name and when a resolver
 * is configured, every address the name resolves to now.
 */
export async function checkDestination(
  raw: string,
  settings: {
    environment: "development" | "test" | "production";
    webhookDnsResolverUrl: string | null;
    webhookTimeoutMs: number;
  },
): Promise<DestinationVerdict> {
  const verdict = checkPublicUrl(raw, settings.environment);
  if (!verdict.ok) return verdict;
  const host = verdict.url.hostname.toLowerCase().replace(/\.$/, "");
  if (!settings.webhookDnsResolverUrl || host.startsWith("[") || ipv4Octets(host)) return { ok: true };
  // Loopback names allowed in development and tests are judged by the registration rule alone.
  if (settings.environment !== "production" && (host === "localhost" || host.endsWith(".localhost")))
    return { ok: true };
  let addresses: string[];
  try {
    addresses = await resolveHost(settings.webhookDnsResolverUrl, host, Math.min(settings.webhookTimeoutMs, 5_000));
  } catch (error) {
    return {
      ok: false,
      reason: `dns_resolution_failed: ${String(error instanceof Error ? error.message : error).slice(0, 100)}`,
    };
  }
  if (addresses.length === 0) return { ok: false, reason: "dns_no_address" };
  const forbidden = addresses.find(isForbiddenAddress);
  return forbidden ? { ok: false, reason: `forbidden_address_resolved: ${forbidden}` } : { ok: true };
}
