/**
 * Which URLs the service will send a request to on someone's word: a webhook
 * endpoint, and a resource an agent's MCP tool fetches. In production: https only, to
 * public hosts; loopback, private, link-local, CGNAT, multicast, unspecified
 * and cloud metadata addresses are refused, in every spelling the URL parser
 * accepts (decimal, octal and hex IPv4 are normalized by WHATWG URL parsing;
 * IPv4-mapped IPv6 is unwrapped here). In development and tests, plain http
 * to loopback is also allowed, so a local receiver works.
 */
export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

const BLOCKED_NAMES = [
  /^localhost$/,
  /\.localhost$/,
  /\.local$/,
  /\.internal$/,
  /^metadata$/,
  /^metadata\.google\.internal$/,
];

export function ipv4Octets(host: string): number[] | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!match) return null;
  const octets = match.slice(1).map(Number);
  return octets.every((o) => o <= 255) ? octets : null;
}

/** True for IPv4 addresses that must never receive our requests in production. */
export function isForbiddenIpv4([a, b]: number[]): boolean {
  if (a === undefined || b === undefined) return true;
  return (
    a === 0 || // "this" network, 0.0.0.0
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) || // CGNAT
    (a === 169 && b === 254) || // link-local, cloud metadata
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0) || // IETF protocol assignments
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    a >= 224 // multicast and reserved
  );
}

/** Expands an IPv6 literal (without brackets) to eight 16-bit groups. */
export function ipv6Groups(host: string): number[] | null {
  let text = host.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = ipv4Octets(dotted[1]!);
    if (!v4) return null;
    text =
      text.slice(0, -dotted[1]!.length) +
      `${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const parse = (part: string) =>
    part === "" ? [] : part.split(":").map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16) : NaN));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  const fill = halves.length === 2 ? 8 - head.length - tail.length : 0;
  const groups = [...head, ...Array<number>(Math.max(fill, 0)).fill(0), ...tail];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g)) ? groups : null;
}

export function isForbiddenIpv6(groups: number[]): boolean {
  const [g0 = 0, , , , , g5 = 0, g6 = 0, g7 = 0] = groups;
  if (groups.every((g) => g === 0)) return true; // ::
  if (groups.slice(0, 7).every((g) => g === 0) && g7 === 1) return true; // ::1
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): judge the IPv4 inside.
  if (groups.slice(0, 5).every((g) => g === 0) && (g5 === 0xffff || g5 === 0)) {
    return isForbiddenIpv4([g6 >> 8, g6 & 255, g7 >> 8, g7 & 255]);
  }
  if ((g0 & 0xfe00) === 0xfc00) return true; // unique local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80) return true; // link-local fe80::/10
  if ((g0 & 0xff00) === 0xff00) return true; // multicast
  if (g0 === 0x64 && groups[1] === 0xff9b) return isForbiddenIpv4([g6 >> 8, g6 & 255, g7 >> 8, g7 & 255]); // NAT64
  return false;
}

const isLoopbackHost = (host: string) => {
  const v4 = ipv4Octets(host);
  if (v4) return v4[0] === 127;
  if (host.startsWith("[")) {
    const groups = ipv6Groups(host.slice(1, -1));
    return groups?.slice(0, 7).every((g) => g === 0) && groups[7] === 1;
  }
  return host === "localhost";
};

/** Judges a URL the service is asked to reach: the rule above, for the deployment's environment. */
export function checkPublicUrl(raw: string, environment: "development" | "test" | "production"): UrlVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "not_a_url" };
  }
  if (url.username || url.password) return { ok: false, reason: "credentials_in_url" };
  // A trailing dot is the same DNS name ("localhost." is localhost): judge the name without it.
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  const local = environment !== "production";
  if (local && isLoopbackHost(host) && (url.protocol === "http:" || url.protocol === "https:"))
    return { ok: true, url };
  if (url.protocol !== "https:") return { ok: false, reason: "https_required" };
  if (host.startsWith("[")) {
    const groups = ipv6Groups(host.slice(1, -1));
    if (!groups || isForbiddenIpv6(groups)) return { ok: false, reason: "forbidden_address" };
    return { ok: true, url };
  }
  const v4 = ipv4Octets(host);
  if (v4) return isForbiddenIpv4(v4) ? { ok: false, reason: "forbidden_address" } : { ok: true, url };
  if (!host.includes(".") || BLOCKED_NAMES.some((pattern) => pattern.test(host)))
    return { ok: false, reason: "forbidden_host" };
  return { ok: true, url };
}
