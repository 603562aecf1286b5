import { describe, expect, it } from "vitest";
import { settingsOf, type Env } from "../../src/env";
import { PRODUCTION_LIKE_RECEIPT_KEY, TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";

// Settings fail closed: production never runs on a missing or insecure value.
const production = (vars: Partial<Env> = {}): Env =>
  ({
    ENVIRONMENT: "production",
    CONSOLE_SESSION_SECRET: "a-real-production-secret-with-enough-entropy-0123456789",
    WEBHOOK_SECRETS_KEY: "another-real-production-secret-with-entropy-0123456789",
    RECEIPT_SIGNING_KEY: PRODUCTION_LIKE_RECEIPT_KEY,
    ...vars,
  }) as Env;

const RECEIVING_KEY = "test test test test test test test test test test test junk";
const X402 = {
  X402_PAY_TO: "0x000000000000000000000000000000000000dEaD",
  X402_ASSET: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  RPC_URL: "https://rpc.example.com",
  DEPOSIT_MNEMONIC: RECEIVING_KEY,
};

describe("settings", () => {
  it("a complete production configuration parses, with keys required and codes not printed", () => {
    const s = settingsOf(production());
    expect(s.environment).toBe("production");
    expect(s.requireApiKey).toBe(true);
    expect(s.mail.transport).toBe("none");
    expect(s.x402).toBeNull();
  });

  it("an absent ENVIRONMENT means production", () => {
    expect(settingsOf(production({ ENVIRONMENT: undefined })).environment).toBe("production");
  });

  it.each([
    ["a missing console session secret", { CONSOLE_SESSION_SECRET: undefined }, /CONSOLE_SESSION_SECRET/],
    ["a short console session secret", { CONSOLE_SESSION_SECRET: "short" }, /CONSOLE_SESSION_SECRET/],
    ["a missing webhook secrets key", { WEBHOOK_SECRETS_KEY: undefined }, /WEBHOOK_SECRETS_KEY/],
    [
      "a development secret",
      { CONSOLE_SESSION_SECRET: "dev-only-console-session-secret-0123456789abcdef" },
      /development value/,
    ],
    ["a missing receipt signing key", { RECEIPT_SIGNING_KEY: undefined }, /RECEIPT_SIGNING_KEY/],
    [
      "a receipt signing key that is not JSON",
      { RECEIPT_SIGNING_KEY: "{not json" },
      /RECEIPT_SIGNING_KEY must be a private JWK/,
    ],
    [
      "a receipt signing key without its private part",
      { RECEIPT_SIGNING_KEY: JSON.stringify({ ...TEST_RECEIPT_KEYS[1], d: undefined, kid: "k" }) },
      /RECEIPT_SIGNING_KEY/,
    ],
    [
      "a development receipt signing key",
      { RECEIPT_SIGNING_KEY: JSON.stringify(TEST_RECEIPT_KEYS[1]) },
      /development key/,
    ],
    [
      "a development key among the published ones",
      { RECEIPT_PUBLISHED_KEYS: JSON.stringify([{ ...TEST_RECEIPT_KEYS[0], d: undefined }]) },
      /publishes a development key/,
    ],
    [
      "a private key among the published ones",
      { RECEIPT_PUBLISHED_KEYS: JSON.stringify([TEST_RECEIPT_KEYS[0]]) },
      /RECEIPT_PUBLISHED_KEYS/,
    ],
    ["anonymous access", { SERVICE_REQUIRE_API_KEY: "false" }, /SERVICE_REQUIRE_API_KEY/],
    ["sign-in codes printed to the log", { MAIL_TRANSPORT: "log" }, /MAIL_TRANSPORT=log/],
    ["an HTTP mail transport without its URL", { MAIL_TRANSPORT: "http", MAIL_FROM: "c@example.com" }, /MAIL_HTTP_URL/],
    ["Access with a team but no audience", { ACCESS_TEAM_DOMAIN: "team.cloudflareaccess.com" }, /ACCESS_AUD/],
    [
      "x402 without an RPC URL",
      {
        X402_PAY_TO: "0x000000000000000000000000000000000000dEaD",
        X402_ASSET: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)}`,
      },
      /RPC_URL/,
    ],
    ["x402 with neither a facilitator URL nor a gas key", { ...X402 }, /FACILITATOR_PRIVATE_KEY/],
    // Without it every charge would advertise one address, and an authorization made for one would pay any other.
    [
      "x402 without its receiving key",
      { ...X402, DEPOSIT_MNEMONIC: undefined, FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)}` },
      /DEPOSIT_MNEMONIC is required/,
    ],
    [
      "a receiving key that is not a mnemonic",
      { ...X402, DEPOSIT_MNEMONIC: "hunter2", FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)}` },
      /DEPOSIT_MNEMONIC must be a BIP-39 mnemonic/,
    ],
    [
      "a gas key that is not a 32-byte hex key",
      { ...X402, FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)},0x1234` },
      /32-byte hex private keys/,
    ],
    [
      "a gas key named twice",
      { ...X402, FACILITATOR_PRIVATE_KEY: `0x${"a".repeat(64)}, 0x${"A".repeat(64)}` },
      /twice/,
    ],
    [
      "an empty gas key list entry",
      { ...X402, FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)},` },
      /32-byte hex private keys/,
    ],
    [
      "a cleartext mail API",
      { MAIL_TRANSPORT: "http", MAIL_FROM: "c@example.com", MAIL_HTTP_URL: "http://mail.example.com/send" },
      /MAIL_HTTP_URL must be https/,
    ],
    [
      "a cleartext Access certificates URL",
      {
        ACCESS_TEAM_DOMAIN: "team.cloudflareaccess.com",
        ACCESS_AUD: "aud",
        ACCESS_CERTS_URL: "http://team.cloudflareaccess.com/certs",
      },
      /ACCESS_CERTS_URL must be https/,
    ],
    [
      "a cleartext DNS resolver",
      { WEBHOOK_DNS_RESOLVER_URL: "http://dns.example.com/dns-query" },
      /WEBHOOK_DNS_RESOLVER_URL must be https/,
    ],
    [
      "a cleartext RPC URL",
      { ...X402, RPC_URL: "http://rpc.example.com", FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)}` },
      /RPC_URL must be https/,
    ],
    [
      "a cleartext facilitator",
      { ...X402, X402_FACILITATOR_URL: "http://facilitator.example.com/" },
      /X402_FACILITATOR_URL must be https/,
    ],
  ])("refuses %s", (_name, vars, message) => {
    expect(() => settingsOf(production(vars as Partial<Env>))).toThrow(message);
  });

  it("a facilitator header secret that is not JSON is refused without being repeated in the error", () => {
    const vars = {
      ...X402,
      X402_FACILITATOR_URL: "https://facilitator.example.com/",
      X402_FACILITATOR_HEADERS: "Bearer s3cr3t-facilitator-token",
    };
    let message = "";
    try {
      settingsOf(production(vars));
    } catch (error) {
      message = String(error);
    }
    expect(message).toContain("X402_FACILITATOR_HEADERS must be a JSON object of strings");
    expect(message).not.toContain("s3cr3t");
    const parsed = settingsOf(production({ ...vars, X402_FACILITATOR_HEADERS: '{"authorization":"Bearer s3cr3t"}' }));
    expect(parsed.x402?.facilitatorHeaders).toEqual({ authorization: "Bearer s3cr3t" });
  });

  it("takes one gas key or several, separated by commas: one settlement lane each", () => {
    const one = settingsOf(production({ ...X402, FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)}` }));
    expect(one.x402?.facilitatorPrivateKeys).toEqual([`0x${"1".repeat(64)}`]);
    const three = settingsOf(
      production({
        ...X402,
        FACILITATOR_PRIVATE_KEY: ` 0x${"1".repeat(64)}, 0x${"2".repeat(64)},0x${"3".repeat(64)} `,
      }),
    );
    expect(three.x402?.facilitatorPrivateKeys).toEqual([
      `0x${"1".repeat(64)}`,
      `0x${"2".repeat(64)}`,
      `0x${"3".repeat(64)}`,
    ]);
    const remote = settingsOf(
      production({
        ...X402,
        FACILITATOR_PRIVATE_KEY: undefined,
        X402_FACILITATOR_URL: "https://facilitator.example.com/",
      }),
    );
    expect(remote.x402?.facilitatorPrivateKeys).toEqual([]);
  });

  it("development may run without keys on console routes only by explicit choice", () => {
    const s = settingsOf(production({ ENVIRONMENT: "development", SERVICE_REQUIRE_API_KEY: "false" }));
    expect(s.requireApiKey).toBe(false);
    expect(s.mail.transport).toBe("log");
  });

  it("ARCHIVE_AFTER_DAYS: 90 days when absent, 0 archives everything checkpointed, never negative or fractional", () => {
    expect(settingsOf(production()).archiveAfterMs).toBe(90 * 86_400_000);
    expect(settingsOf(production({ ARCHIVE_AFTER_DAYS: "0" })).archiveAfterMs).toBe(0);
    expect(settingsOf(production({ ARCHIVE_AFTER_DAYS: "30" })).archiveAfterMs).toBe(30 * 86_400_000);
    for (const bad of ["-1", "1.5", "soon"])
      expect(() => settingsOf(production({ ARCHIVE_AFTER_DAYS: bad }))).toThrow(/ARCHIVE_AFTER_DAYS/);
  });

  // Both delete or move data: a value that is not plainly a number of days must not run as 0 or 16.
  it("ARCHIVE_AFTER_DAYS and RETENTION_DAYS refuse an empty value and any number not in decimal digits", () => {
    expect(settingsOf(production({ RETENTION_DAYS: "7" })).retentionDays).toBe(7);
    for (const name of ["ARCHIVE_AFTER_DAYS", "RETENTION_DAYS"])
      for (const bad of ["", " ", "0x10", "0b11", "1e2", " 7"])
        expect(() => settingsOf(production({ [name]: bad })), `${name}=${JSON.stringify(bad)}`).toThrow(name);
  });
});
