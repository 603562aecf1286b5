import { describe, expect, it } from "vitest";
import { checkPublicUrl } from "../../src/lib/url-guard";

/*
 * The SSRF guard on webhook URLs (docs/decisions.md, Webhooks): in
 * production only https to public hosts; loopback, private, link-local, CGNAT,
 * unspecified, multicast and metadata addresses are refused in every spelling
 * a URL parser accepts. In development and tests, plain http to loopback is
 * allowed as well, and nothing else private.
 */

describe("checkPublicUrl in production refuses every forbidden class", () => {
  const refused: [string, string][] = [
    ["plain http to a public host", "http://example.com/hook"],
    ["plain http to a public address", "http://93.184.216.34/x"],
    ["another scheme", "ftp://example.com/x"],
    ["a file URL", "file:///etc/passwd"],
    ["not a URL", "not a url"],
    ["loopback 127.0.0.1", "https://127.0.0.1/x"],
    ["loopback 127.1.2.3", "https://127.1.2.3/x"],
    ["loopback with a port", "https://127.0.0.1:8443/x"],
    ["loopback in short form 127.1", "https://127.1/x"],
    ["localhost", "https://localhost/x"],
    ["LOCALHOST in capitals", "https://LOCALHOST/x"],
    ["a subdomain of localhost", "https://x.localhost/x"],
    ["10/8", "https://10.0.0.1/x"],
    ["10/8 top", "https://10.255.255.255/x"],
    ["172.16/12 bottom", "https://172.16.0.1/x"],
    ["172.16/12 top", "https://172.31.255.255/x"],
    ["192.168/16", "https://192.168.1.1/x"],
    ["the metadata address 169.254.169.254", "https://169.254.169.254/latest/meta-data"],
    ["link-local 169.254/16", "https://169.254.1.1/x"],
    ["CGNAT 100.64/10", "https://100.64.0.1/x"],
    ["CGNAT 100.64/10 top", "https://100.127.255.255/x"],
    ["the unspecified 0.0.0.0", "https://0.0.0.0/x"],
    ["multicast 224.0.0.1", "https://224.0.0.1/x"],
    ["broadcast", "https://255.255.255.255/x"],
    ["IPv6 loopback [::1]", "https://[::1]/x"],
    ["IPv6 loopback written out", "https://[0:0:0:0:0:0:0:1]/x"],
    ["IPv6 unspecified [::]", "https://[::]/x"],
    ["IPv6 link-local [fe80::1]", "https://[fe80::1]/x"],
    ["IPv6 unique local [fc00::1]", "https://[fc00::1]/x"],
    ["IPv6 unique local [fd12:3456::1]", "https://[fd12:3456::1]/x"],
    ["IPv6 multicast [ff02::1]", "https://[ff02::1]/x"],
    ["IPv4-mapped loopback [::ffff:127.0.0.1]", "https://[::ffff:127.0.0.1]/x"],
    ["IPv4-mapped loopback in hex [::ffff:7f00:1]", "https://[::ffff:7f00:1]/x"],
    ["IPv4-mapped private [::ffff:10.0.0.1]", "https://[::ffff:10.0.0.1]/x"],
    ["IPv4-mapped metadata [::ffff:169.254.169.254]", "https://[::ffff:169.254.169.254]/x"],
    ["IPv4-compatible loopback [::127.0.0.1]", "https://[::127.0.0.1]/x"],
    ["NAT64 of loopback [64:ff9b::127.0.0.1]", "https://[64:ff9b::127.0.0.1]/x"],
    ["decimal loopback 2130706433", "https://2130706433/x"],
    ["octal loopback 0177.0.0.1", "https://0177.0.0.1/x"],
    ["hex loopback 0x7f.0.0.1", "https://0x7f.0.0.1/x"],
    ["hex loopback in one number 0x7f000001", "https://0x7f000001/x"],
    ["decimal metadata 2852039166", "https://2852039166/x"],
    ["octal private 012.0.0.1", "https://012.0.0.1/x"],
    ["metadata.google.internal", "https://metadata.google.internal/computeMetadata/v1/"],
    ["a *.internal name", "https://service.internal/x"],
    ["a deeper *.internal name", "https://a.b.corp.internal/x"],
    ["a *.local name", "https://printer.local/x"],
    ["a single-label host", "https://intranet/x"],
    ["the single-label metadata name", "https://metadata/x"],
    ["credentials in the URL", "https://user:pass@example.com/x"],
    ["a user name in the URL", "https://user@example.com/x"],
    ["a password only in the URL", "https://:pass@example.com/x"],
  ];

  it.each(refused)("refuses %s (%s)", (_name, url) => {
    const verdict = checkPublicUrl(url, "production");
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.reason).toEqual(expect.any(String));
  });

  // A trailing dot is the same DNS name (the fully qualified spelling); it must not slip past the name rules.
  it.each([
    ["localhost.", "https://localhost./x"],
    ["x.localhost.", "https://x.localhost./x"],
    ["metadata.google.internal.", "https://metadata.google.internal./computeMetadata/v1/"],
    ["service.internal.", "https://service.internal./x"],
    ["a single label with a trailing dot", "https://intranet./x"],
  ])("refuses the fully qualified spelling %s (%s)", (_name, url) => {
    expect(checkPublicUrl(url, "production").ok).toBe(false);
  });

  it("names the reason for the main classes", () => {
    const reason = (url: string) => {
      const verdict = checkPublicUrl(url, "production");
      return verdict.ok ? "accepted" : verdict.reason;
    };
    expect(reason("http://example.com/x")).toBe("https_required");
    expect(reason("https://10.0.0.1/x")).toBe("forbidden_address");
    expect(reason("https://[::1]/x")).toBe("forbidden_address");
    expect(reason("https://localhost/x")).toBe("forbidden_host");
    expect(reason("https://user:pass@example.com/x")).toBe("credentials_in_url");
    expect(reason("nope")).toBe("not_a_url");
  });
});

describe("checkPublicUrl in production accepts public https", () => {
  it.each([
    "https://example.com/hook",
    "https://hooks.example.com:8443/in?x=1",
    "https://93.184.216.34/x",
    "https://8.8.8.8/x",
    "https://172.32.0.1/x",
    "https://100.128.0.1/x",
    "https://[2606:4700::1]/x",
    "https://[::ffff:93.184.216.34]/x",
  ])("accepts %s", (url) => {
    const verdict = checkPublicUrl(url, "production");
    expect(verdict.ok).toBe(true);
    if (verdict.ok) expect(verdict.url.protocol).toBe("https:");
  });

  it("refuses plain http to loopback in production", () => {
    expect(checkPublicUrl("http://127.0.0.1:8080/x", "production").ok).toBe(false);
    expect(checkPublicUrl("http://localhost:8080/x", "production").ok).toBe(false);
    expect(checkPublicUrl("http://[::1]:8080/x", "production").ok).toBe(false);
  });
});

describe.each(["development", "test"] as const)("checkPublicUrl in %s", (environment) => {
  it("accepts plain http to loopback, so a local receiver works", () => {
    expect(checkPublicUrl("http://127.0.0.1:8080/x", environment).ok).toBe(true);
    expect(checkPublicUrl("http://localhost:8080/x", environment).ok).toBe(true);
    expect(checkPublicUrl("http://[::1]:8080/x", environment).ok).toBe(true);
    expect(checkPublicUrl("https://example.com/hook", environment).ok).toBe(true);
  });

  it.each([
    "http://10.0.0.1/x",
    "https://10.0.0.1/x",
    "http://192.168.1.5/x",
    "http://172.16.0.1/x",
    "http://169.254.169.254/latest/meta-data",
    "https://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/x",
    "http://0.0.0.0:8080/x",
    "http://[fe80::1]/x",
    "http://[::ffff:10.0.0.1]/x",
    "https://metadata.google.internal/x",
    "http://example.com/x",
    "ftp://127.0.0.1/x",
    "http://user:pass@127.0.0.1:8080/x",
  ])("still refuses %s", (url) => {
    expect(checkPublicUrl(url, environment).ok).toBe(false);
  });
});
