import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { DEFAULT_RETRY_SCHEDULE, type Env, type Settings, settingsOf } from "../../src/config/env";
import worker from "../../src/index";
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

/** x402 configured completely, so its group is parsed. */
const X402_ON = { ...X402, FACILITATOR_PRIVATE_KEY: `0x${"1".repeat(64)}` };

/**
 * Every numeric setting: its bounds and default as the schema states them, where the parsed value is
 * read, other vars it needs (its group, or a setting it is checked against), and a valid value
 * other than the default.
 */
const NUMERIC_SETTINGS: {
  name: keyof Env & string;
  min: number;
  max: number;
  fallback: number;
  valid: number;
  read: (s: Settings) => number | undefined;
  with?: Partial<Env>;
}[] = [
  {
    name: "APPROVAL_TTL_HOURS",
    min: 1,
    max: 720,
    fallback: 24,
    valid: 48,
    read: (s) => s.approvalTtlMs / 3_600_000,
  },
  {
    name: "ARCHIVE_AFTER_DAYS",
    min: 0,
    max: 36_500,
    fallback: 90,
    valid: 30,
    read: (s) => s.archiveAfterMs / 86_400_000,
  },
  { name: "RETENTION_DAYS", min: 3, max: 3650, fallback: 30, valid: 7, read: (s) => s.retentionDays },
  { name: "WEBHOOK_TIMEOUT_MS", min: 1, max: 30_000, fallback: 10_000, valid: 2000, read: (s) => s.webhookTimeoutMs },
  {
    name: "X402_CHAIN_ID",
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    fallback: 8453,
    valid: 84532,
    read: (s) => s.x402?.chainId,
    with: X402_ON,
  },
  {
    name: "X402_MAX_TIMEOUT_SECONDS",
    min: 30,
    max: 3600,
    fallback: 300,
    valid: 60,
    read: (s) => s.x402?.maxTimeoutSeconds,
    with: X402_ON,
  },
  {
    name: "X402_MAX_AUTHORIZATION_SECONDS",
    min: 30,
    max: 604_800,
    fallback: 86_400,
    valid: 3600,
    read: (s) => s.x402?.maxAuthorizationSeconds,
    // At least X402_MAX_TIMEOUT_SECONDS, so its own minimum needs that one at its minimum too.
    with: { ...X402_ON, X402_MAX_TIMEOUT_SECONDS: "30" },
  },
  {
    name: "X402_FACILITATOR_TIMEOUT_MS",
    min: 1,
    max: 120_000,
    fallback: 30_000,
    valid: 5000,
    read: (s) => s.x402?.facilitatorTimeoutMs,
    with: X402_ON,
  },
  {
    name: "X402_SETTLEMENT_BATCH_MAX",
    min: 1,
    max: 100,
    fallback: 50,
    valid: 10,
    // 1 turns batching off: one authorization per transaction.
    read: (s) => s.x402?.settlementBatch?.max ?? 1,
    with: { ...X402_ON, X402_SETTLEMENT_BATCH_ADDRESS: "0x000000000000000000000000000000000000bEEF" },
  },
  {
    name: "DEPOSIT_CONFIRMATIONS",
    min: 0,
    max: 1000,
    fallback: 3,
    valid: 12,
    read: (s) => s.x402?.depositConfirmations,
    with: X402_ON,
  },
  {
    name: "RPC_MAX_LOG_RANGE",
    min: 1,
    max: 1_000_000,
    fallback: 1000,
    valid: 500,
    read: (s) => s.x402?.maxLogRange,
    with: X402_ON,
  },
  {
    name: "RPC_MAX_BATCH",
    min: 1,
    max: 10_000,
    fallback: 100,
    valid: 25,
    read: (s) => s.x402?.maxBatch,
    with: X402_ON,
  },
  {
    name: "CHAIN_START_BLOCK",
    min: 0,
    max: Number.MAX_SAFE_INTEGER,
    fallback: 0,
    valid: 12_345_678,
    read: (s) => s.x402?.startBlock,
    with: X402_ON,
  },
];

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

  // A value not plainly a whole number in decimal digits, or outside the setting's bounds, stops the
  // service with the setting named: it never runs as 0 (empty), 16 (0x10), 100 (1e2) or the default.
  describe.each(NUMERIC_SETTINGS)("$name", ({ name, min, max, fallback, valid, read, with: others = {} }) => {
    const parse = (value: string | undefined) => settingsOf(production({ ...others, [name]: value }));

    it(`absent is ${fallback}; ${valid}, ${min} and ${max} parse as written`, () => {
      expect(read(parse(undefined))).toBe(fallback);
      expect(read(parse(String(fallback)))).toBe(fallback);
      for (const value of [valid, min, max]) expect(read(parse(String(value))), `${name}=${value}`).toBe(value);
    });

    it.each([
      ["empty", ""],
      ["blank", " "],
      ["hex", "0x10"],
      ["binary", "0b11"],
      ["an exponent", "1e2"],
      ["spaces around it", ` ${valid} `],
      ["a plus sign", `+${valid}`],
      ["a fraction", `${valid}.5`],
      ["a decimal point", `${valid}.0`],
      ["digit grouping", "1_000"],
      ["a word", "soon"],
      ["Infinity", "Infinity"],
      ["negative", "-1"],
      ["below its minimum", min > 0 ? String(min - 1) : "-1"],
      ["above its maximum", max === Number.MAX_SAFE_INTEGER ? "9007199254740993" : String(max + 1)],
    ])("refuses %s (%j)", (_what, value) => {
      expect(() => parse(value)).toThrow(new RegExp(`\\b${name} `));
    });
  });

  describe("WEBHOOK_RETRY_SCHEDULE", () => {
    const parse = (value: string | undefined) =>
      settingsOf(production({ WEBHOOK_RETRY_SCHEDULE: value })).webhookRetrySchedule;

    it("absent is the default schedule; whole seconds 0-43,200, 1-30 of them, spaces around commas allowed", () => {
      expect(parse(undefined)).toEqual(DEFAULT_RETRY_SCHEDULE.split(",").map(Number));
      expect(parse(undefined)).toEqual([10, 30, 120, 600, 3600, 21600, 43200, 43200, 43200, 43200, 43200]);
      expect(parse("0")).toEqual([0]);
      expect(parse("43200")).toEqual([43200]);
      expect(parse("10,30,120")).toEqual([10, 30, 120]);
      expect(parse("10, 30 ,120")).toEqual([10, 30, 120]);
      expect(parse(Array(30).fill("5").join(","))).toHaveLength(30);
    });

    it.each([
      ["empty", ""],
      ["an empty entry", "10,,30"],
      ["a trailing comma", "10,30,"],
      ["hex", "10,0x10"],
      ["an exponent", "1e2"],
      ["a fraction", "10,1.5"],
      ["negative", "-1"],
      ["above the longest queue delay", "43201"],
      ["more than 30 entries", Array(31).fill("5").join(",")],
    ])("refuses %s (%j)", (_what, value) => {
      expect(() => parse(value)).toThrow(/\bWEBHOOK_RETRY_SCHEDULE\b/);
    });
  });

  // Where the settings are read: a request, the cron and the queue all stop rather than run on a default.
  it("an invalid number fails closed everywhere: a request answers 500 and its log line names the setting; the cron and the queue throw", async () => {
    const broken = { ...env, DEPOSIT_CONFIRMATIONS: "" } as Env;
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const res = await worker.fetch!(
        new Request("http://service.test/.well-known/jwks.json"),
        broken,
        createExecutionContext(),
      );
      expect(res.status).toBe(500);
      expect(await res.json()).toMatchObject({ error: "internal_error" });
      const logged = error.mock.calls.flat().map(String).join("\n");
      expect(logged).toContain('"where":"request_failed"');
      expect(logged).toMatch(/Invalid x402 configuration: DEPOSIT_CONFIRMATIONS expected a whole number/);
    } finally {
      error.mockRestore();
    }
    const controller = createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() });
    await expect(worker.scheduled!(controller, broken, createExecutionContext())).rejects.toThrow(
      /DEPOSIT_CONFIRMATIONS/,
    );
    const batch = { queue: "webhooks", messages: [] } as unknown as MessageBatch;
    await expect(worker.queue!(batch, broken)).rejects.toThrow(/DEPOSIT_CONFIRMATIONS/);
  });
});
