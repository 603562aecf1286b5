import { normalizePolicy, PolicySchema } from "../../agents/policy";
import type { Ui } from "./render";
import { parseForm } from "./session";

export type FormBody = Record<string, string | File>;

/** The submitted form, one value a field. */
export const form = async (c: Ui) => (await parseForm(c)) as FormBody;

/** A text field, trimmed; "" when absent. */
export const field = (body: FormBody, name: string) =>
  typeof body[name] === "string" ? (body[name] as string).trim() : "";

/** Cents typed in a field: null when empty, NaN (refused by every schema) when not whole digits. */
export const optionalCents = (text: string) => (text === "" ? null : /^\d+$/.test(text) ? Number(text) : Number.NaN);

/** The grace of a key roll from its form: the select's seconds, or RollKeyBody's default when the field is absent. */
export const graceFromForm = (body: FormBody) => {
  const text = field(body, "graceSeconds");
  return text === "" ? {} : { graceSeconds: /^\d+$/.test(text) ? Number(text) : Number.NaN };
};

/** What RollKeyBody accepts. */
export const GRACE_RULE = "the old key's grace is whole seconds from 0 to 604,800 (7 days)";

/** What the policy and credit forms accept, as PolicySchema and CreditBody do. */
export const AMOUNT_RULE =
  "amounts as whole cents up to $1,000,000,000 (limits above 0), and up to 100 categories of up to 64 characters";

/**
 * A policy from form fields (empty = no limit), checked by the API's own PolicySchema: every
 * read of a stored policy parses it strictly, so a page must not store one the API would refuse.
 * Null when the form breaks a rule.
 */
export function policyFromForm(body: FormBody) {
  const categories = field(body, "allowedCategories")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const parsed = PolicySchema.safeParse({
    maxPerTransactionUsdCents: optionalCents(field(body, "maxPerTransactionUsdCents")),
    dailyLimitUsdCents: optionalCents(field(body, "dailyLimitUsdCents")),
    approvalThresholdUsdCents: optionalCents(field(body, "approvalThresholdUsdCents")),
    allowedCategories: categories.length > 0 ? categories : null,
  });
  return parsed.success ? normalizePolicy(parsed.data) : null;
}
