import { normalizePolicy, PolicySchema } from "../../agents/policy";
import type { Ui } from "./render";
import { parseForm } from "./session";

export type FormBody = Record<string, string | File>;

/** The submitted form, one value a field. */
export const form = async (c: Ui) => (await parseForm(c)) as FormBody;

/** A text field, trimmed; "" when absent. */
export const field = (body: FormBody, name: string) =>
  typeof body[name] === "string" ? (body[name] as string).trim() : "";

/**
 * Dollars typed in a field ("12", "12.5", "$1,250.00") as integer cents, read as text and never
 * through a float: null when empty, NaN (refused by every schema) when not an amount of at most
 * two decimals. The API keeps cents; people type dollars.
 */
export function optionalDollars(text: string): number | null {
  if (text === "") return null;
  const amount = /^\$?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?$/.exec(text);
  const whole = amount?.[1]?.replaceAll(",", "");
  // Twelve digits of dollars is past any amount the API takes, and keeps the cents exact in a number.
  if (!amount || !whole || whole.length > 12) return Number.NaN;
  return Number(whole) * 100 + Number((amount[2] ?? "").padEnd(2, "0"));
}

/** Cents as a form field's dollars ("1250.00"): what optionalDollars reads back as the same cents. */
export const dollarsField = (cents: number | null | undefined) =>
  cents == null ? "" : `${Math.trunc(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;

/** The grace of a key roll from its form: the select's seconds, or RollKeyBody's default when the field is absent. */
export const graceFromForm = (body: FormBody) => {
  const text = field(body, "graceSeconds");
  return text === "" ? {} : { graceSeconds: /^\d+$/.test(text) ? Number(text) : Number.NaN };
};

/** What RollKeyBody accepts. */
export const GRACE_RULE = "the old key's grace is whole seconds from 0 to 604,800 (7 days)";

/** A comma-separated field as its items, trimmed, empty ones dropped. */
const listField = (body: FormBody, name: string) =>
  field(body, name)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** What the policy and credit forms accept, as PolicySchema and CreditBody do. */
export const AMOUNT_RULE =
  "amounts in dollars with at most two decimals, up to $1,000,000,000 (limits above $0), up to 100 categories of up to 64 characters, and up to 100 x402 hosts (host names, or *)";

/**
 * A policy from form fields (empty = no limit), checked by the API's own PolicySchema: every
 * read of a stored policy parses it strictly, so a page must not store one the API would refuse.
 * Null when the form breaks a rule.
 */
export function policyFromForm(body: FormBody) {
  const categories = listField(body, "allowedCategories");
  // Host names are case-insensitive; the policy keeps them in lower case.
  const hosts = listField(body, "allowedX402Hosts").map((h) => h.toLowerCase());
  const parsed = PolicySchema.safeParse({
    maxPerTransactionUsdCents: optionalDollars(field(body, "maxPerTransactionUsd")),
    dailyLimitUsdCents: optionalDollars(field(body, "dailyLimitUsd")),
    approvalThresholdUsdCents: optionalDollars(field(body, "approvalThresholdUsd")),
    allowedCategories: categories.length > 0 ? categories : null,
    allowedX402Hosts: hosts.length > 0 ? hosts : null,
  });
  return parsed.success ? normalizePolicy(parsed.data) : null;
}
