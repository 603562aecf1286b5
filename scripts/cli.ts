// The operator's command line (`npm run --silent cli -- <command>`).
//   console-token --email <address>      print a console session token, nothing else
//   agent create --name <n> [--credit <cents>] [--max-per-tx <cents>] [--daily-limit <cents>]
//                [--approval-threshold <cents>] [--categories a,b] [--x402-hosts host,host|*]
//                                        create an agent; print { agentId, apiKey } as one JSON line
//   agent roll-key <agentId> [--grace <seconds>]
//                                        a new key; the old one works for the grace (default 1 day, 0 = end it now);
//                                        print { agentId, apiKey, previousKeyExpiresAt } as one JSON line
//   agent freeze <agentId> [--reason <text>]
//                                        refuse every payment of the agent; print { agentId, frozen } as one JSON line
//   agent unfreeze <agentId>             let its policy decide its payments again; print { agentId, frozen }
//   audit verify [--rpc-url <url>] [--anchor <address>] [--anchor-from <a,b,...>] [--offline]
//                [--max-log-range <blocks>] [--from-block <n>]
//                                        recompute every ledger shard's audit chain; name the first broken row;
//                                        check each shard against its signed checkpoints and their anchors read
//                                        from the chain (without a chain: a usage error, unless --offline, which
//                                        checks rows and checkpoints only and says so); every line names its shard
//   evidence verify FILE --keys <url|file> [--rpc-url <url>] [--anchor <address>] [--anchor-from <a,...>] [--offline]
//                                        check a charge's evidence file (GET /merchant/charges/:id/evidence)
//                                        against the service's keys and the chain: receipt, audit row,
//                                        checkpoint, Merkle path and its first anchor (chain settings as audit verify)
// Anchors are read with eth_getLogs in windows of at most --max-log-range blocks (RPC_MAX_LOG_RANGE,
// default 1000: what providers serve), from --from-block (CHAIN_START_BLOCK) when given, otherwise
// from the block of the earliest anchor transaction the checkpoints (or the evidence file) name, as
// its receipt on the chain says.
// A refusal prints the API's answer on standard error and exits 1; a usage mistake exits 2.
// Settings: SERVICE_URL (default http://127.0.0.1:8787); CONSOLE_SESSION_SECRET
// (default: the one `npm run dev` wrote to .dev.vars). audit verify reads the anchors from the chain
// itself: RPC_URL, AUDIT_ANCHOR_ADDRESS and AUDIT_ANCHOR_FROM (the service's gas addresses) or the
// flags, by default the local chain `npm run dev` records in its state directory.
import { type ParseArgsConfig, parseArgs } from "node:util";
import { signConsoleToken } from "../src/auth/jwt";
import { ensureDevVars } from "./lib/dev-vars.mjs";

const SERVICE_URL = (process.env.SERVICE_URL ?? "http://127.0.0.1:8787").replace(/\/$/, "");

class UsageError extends Error {}

function sessionSecret(): string {
  return process.env.CONSOLE_SESSION_SECRET ?? ensureDevVars().CONSOLE_SESSION_SECRET!;
}

async function consoleToken(email: string): Promise<string> {
  return (await signConsoleToken(sessionSecret(), email)).token;
}

const DEFAULT_OPERATOR = "ops@example.com";

async function call<T>(method: string, path: string, token: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(`${SERVICE_URL}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new Error(`cannot reach the service at ${SERVICE_URL} (is \`npm run dev\` running?)`);
  }
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

const cents = (value: string | undefined, flag: string): number | undefined => {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} takes a whole number of cents`);
  return Number(value);
};

async function agentCreate(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      name: { type: "string" },
      credit: { type: "string" },
      "max-per-tx": { type: "string" },
      "daily-limit": { type: "string" },
      "approval-threshold": { type: "string" },
      categories: { type: "string" },
      "x402-hosts": { type: "string" },
      email: { type: "string", default: DEFAULT_OPERATOR },
    },
  });
  if (!values.name) throw new UsageError("agent create needs --name");
  const policy = {
    maxPerTransactionUsdCents: cents(values["max-per-tx"], "--max-per-tx") ?? null,
    dailyLimitUsdCents: cents(values["daily-limit"], "--daily-limit") ?? null,
    approvalThresholdUsdCents: cents(values["approval-threshold"], "--approval-threshold") ?? null,
    allowedCategories: values.categories ? listOf(values.categories) : null,
    // The hosts whose x402 paywalls it may pay from its wallet (`*`: any); absent, none.
    allowedX402Hosts: values["x402-hosts"] ? listOf(values["x402-hosts"]).map((h) => h.toLowerCase()) : null,
  };
  const credit = cents(values.credit, "--credit");
  const token = await consoleToken(values.email);
  const agent = await call<{ agentId: string; apiKey: string }>("POST", "/console/agents", token, {
    name: values.name,
    policy,
  });
  if (credit)
    await call("POST", `/console/agents/${agent.agentId}/credits`, token, { amountUsdCents: credit, reference: "cli" });
  console.log(JSON.stringify({ agentId: agent.agentId, apiKey: agent.apiKey }));
}

/** A comma-separated option as its items, trimmed, empty ones dropped. */
const listOf = (text: string) =>
  text
    .split(",")
    .map((c) => c.trim())
    .filter(Boolean);

/** The one agent id an `agent <verb> <agentId>` command names, and its options. */
function agentAndOptions(verb: string, args: string[], options: NonNullable<ParseArgsConfig["options"]>) {
  const { values, positionals } = parseArgs({
    args,
    options: { ...options, email: { type: "string", default: DEFAULT_OPERATOR } },
    allowPositionals: true,
  });
  if (positionals.length !== 1) throw new UsageError(`agent ${verb} needs one agent id`);
  return {
    agentId: encodeURIComponent(positionals[0]!),
    values: values as { [option: string]: string | undefined; email: string },
  };
}

async function agentRollKey(args: string[]) {
  const { agentId, values } = agentAndOptions("roll-key", args, { grace: { type: "string" } });
  if (values.grace !== undefined && !/^\d+$/.test(values.grace))
    throw new UsageError("--grace takes a whole number of seconds");
  const body = values.grace === undefined ? {} : { graceSeconds: Number(values.grace) };
  console.log(
    JSON.stringify(await call("POST", `/console/agents/${agentId}/keys`, await consoleToken(values.email), body)),
  );
}

async function agentFreeze(args: string[]) {
  const { agentId, values } = agentAndOptions("freeze", args, { reason: { type: "string" } });
  const body = values.reason === undefined ? {} : { reason: values.reason };
  console.log(
    JSON.stringify(await call("POST", `/console/agents/${agentId}/freeze`, await consoleToken(values.email), body)),
  );
}

async function agentUnfreeze(args: string[]) {
  const { agentId, values } = agentAndOptions("unfreeze", args, {});
  console.log(
    JSON.stringify(await call("POST", `/console/agents/${agentId}/unfreeze`, await consoleToken(values.email))),
  );
}

async function auditVerify(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      email: { type: "string", default: DEFAULT_OPERATOR },
      "rpc-url": { type: "string" },
      anchor: { type: "string" },
      "anchor-from": { type: "string" },
      offline: { type: "boolean" },
      "max-log-range": { type: "string" },
      "from-block": { type: "string" },
    },
  });
  // Loaded here: the verifier and the chain code would slow every other command's start.
  const { verifyAgainstCheckpoints } = await import("./lib/audit-verify");
  const token = await consoleToken(values.email);
  const ok = await verifyAgainstCheckpoints(
    <T>(path: string) => call<T>("GET", path, token),
    values,
    (message) => {
      throw new UsageError(message);
    },
  );
  if (!ok) process.exitCode = 1;
}

async function evidenceVerify(args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    options: {
      keys: { type: "string" },
      "rpc-url": { type: "string" },
      anchor: { type: "string" },
      "anchor-from": { type: "string" },
      offline: { type: "boolean" },
      "max-log-range": { type: "string" },
      "from-block": { type: "string" },
    },
    allowPositionals: true,
  });
  if (positionals.length !== 1) throw new UsageError("evidence verify needs one FILE");
  const { verifyEvidenceFile } = await import("./lib/evidence-verify");
  const ok = await verifyEvidenceFile(positionals[0]!, values, (message) => {
    throw new UsageError(message);
  });
  if (!ok) process.exitCode = 1;
}

async function main(argv: string[]) {
  const [command, sub, ...rest] = argv;
  if (command === "console-token") {
    const { values } = parseArgs({ args: argv.slice(1), options: { email: { type: "string" } } });
    if (!values.email) throw new UsageError("console-token needs --email <address>");
    console.log(await consoleToken(values.email));
  } else if (command === "agent" && sub === "create") {
    await agentCreate(rest);
  } else if (command === "agent" && sub === "roll-key") {
    await agentRollKey(rest);
  } else if (command === "agent" && sub === "freeze") {
    await agentFreeze(rest);
  } else if (command === "agent" && sub === "unfreeze") {
    await agentUnfreeze(rest);
  } else if (command === "audit" && sub === "verify") {
    await auditVerify(rest);
  } else if (command === "evidence" && sub === "verify") {
    await evidenceVerify(rest);
  } else {
    throw new UsageError(
      "commands: console-token --email <a> | agent create --name <n> [...] | agent roll-key <agentId> [--grace <seconds>] | agent freeze <agentId> [--reason <r>] | agent unfreeze <agentId> | audit verify [--offline] | evidence verify FILE",
    );
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = error instanceof UsageError ? 2 : 1;
});
