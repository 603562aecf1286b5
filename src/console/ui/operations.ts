import { z } from "zod";
import { ExportQuery } from "../../audit/routes";
import { error, HTML, INVALID, type Method, type Operation, type ResponseSpec } from "../../lib/api-operation";
import { PAYOUT_STATUSES } from "./queries";

const SEE_OTHER = (where: string): ResponseSpec => ({
  description: `Redirect (${where}).`,
  headers: { Location: "Where to go next." },
});
const CSRF: ResponseSpec = error("The `_csrf` field is missing or wrong (`csrf_token_invalid`).", "csrf_token_invalid");
const PAGE_SIGN_IN: ResponseSpec = SEE_OTHER("no page session: to /console/sign-in");
const PayoutPageQuery = z.object({
  status: z.enum(PAYOUT_STATUSES).optional().describe("Only payouts of this status."),
});
const PAGE_NOT_FOUND: ResponseSpec = error("Unknown object (`not_found`).", "not_found");

const page = (
  method: Method,
  path: string,
  operationId: string,
  summary: string,
  responses: Record<number, ResponseSpec>,
  form?: Record<string, string>,
): Operation => ({
  method,
  path,
  operationId,
  summary,
  tag: "Console pages",
  auth: "page",
  ...(form ? { form: { _csrf: "The CSRF token of the page the form is on.", ...form } } : {}),
  responses: method === "post" ? { 303: PAGE_SIGN_IN, 403: CSRF, ...responses } : { 303: PAGE_SIGN_IN, ...responses },
});

/** The console's pages (text/html), documented for completeness; their handlers read form fields themselves. */
export const PAGE_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/console",
    operationId: "consoleRoot",
    summary: "Console entry (redirects to the overview)",
    tag: "Console pages",
    auth: "public",
    responses: { 302: SEE_OTHER("to /console/ui") },
  },
  {
    method: "get",
    path: "/console/sign-in",
    operationId: "consoleSignInPage",
    summary: "Sign-in page",
    tag: "Console pages",
    auth: "public",
    responses: { 200: HTML("The e-mail form; sets the pre-session CSRF cookie.") },
  },
  {
    method: "post",
    path: "/console/sign-in",
    operationId: "consoleSignInSubmit",
    summary: "Ask for a sign-in code",
    tag: "Console pages",
    auth: "public",
    form: { _csrf: "The sign-in page's CSRF token.", email: "The e-mail address." },
    responses: {
      200: HTML("The code form."),
      400: HTML("Not an e-mail address."),
      403: CSRF,
      429: HTML("Too many attempts."),
    },
  },
  {
    method: "post",
    path: "/console/sign-in/verify",
    operationId: "consoleSignInVerify",
    summary: "Sign in with the code",
    tag: "Console pages",
    auth: "public",
    form: { _csrf: "The code form's CSRF token.", email: "The e-mail address.", code: "The 6-digit code." },
    responses: {
      303: SEE_OTHER("signed in: to /console/ui, with the session cookie"),
      401: HTML("The code is not valid."),
      403: CSRF,
    },
  },
  page(
    "post",
    "/console/sign-out",
    "consoleSignOutPage",
    "Sign out of the console",
    { 303: SEE_OTHER("to /console/sign-in; the session is revoked") },
    {},
  ),
  page("get", "/console/ui", "consoleOverview", "Overview", { 200: HTML("Today's totals and paid volume by hour.") }),
  page("get", "/console/ui/merchants", "consoleMerchantsPage", "Merchants", {
    200: HTML("The merchant list and registration form."),
  }),
  page("get", "/console/ui/merchants/:merchantId", "consoleMerchantPage", "One merchant", {
    200: HTML(
      "Its exact balance, its facilitator payTo, the payments settled as its facilitator and its listed resources.",
    ),
    404: HTML("No such merchant: a page that says so."),
  }),
  page("get", "/console/ui/receiving", "consoleReceivingPage", "Receiving addresses", {
    200: HTML(
      "What x402 payments left on each charge's and link's receiving address: settled per the ledger, held per the chain.",
    ),
  }),
  page(
    "post",
    "/console/ui/merchants",
    "consoleRegisterMerchant",
    "Register a merchant",
    { 200: HTML("The list, with the new API key shown once.") },
    { name: "Merchant name.", category: "Optional category." },
  ),
  page(
    "post",
    "/console/ui/merchants/:merchantId/keys",
    "consoleRollMerchantKey",
    "Roll a merchant's API key",
    {
      200: HTML("The list, with the new API key shown once and when the old one stops."),
      303: SEE_OTHER("back to the merchants, with a notice, when the grace is refused"),
      404: PAGE_NOT_FOUND,
    },
    {
      graceSeconds: "Seconds the old key keeps working, 0 to 604800 (default 86400).",
    },
  ),
  page("get", "/console/ui/agents", "consoleAgentsPage", "Agents", { 200: HTML("The agent list and creation form.") }),
  page(
    "post",
    "/console/ui/agents",
    "consoleCreateAgent",
    "Create an agent",
    { 200: HTML("The list, with the new agent key shown once.") },
    {
      name: "Agent name.",
      credit: "Optional first credit in dollars (at most two decimals).",
      maxPerTransactionUsd: "Optional, dollars.",
      dailyLimitUsd: "Optional, dollars.",
      approvalThresholdUsd: "Optional, dollars.",
      allowedCategories: "Optional, comma-separated.",
      allowedX402Hosts: "Optional, comma-separated host names, or *.",
    },
  ),
  page("get", "/console/ui/agents/:agentId", "consoleAgentPage", "One agent", {
    200: HTML("Balance, policy and recent payments."),
    404: PAGE_NOT_FOUND,
  }),
  page(
    "post",
    "/console/ui/agents/:agentId/policy",
    "consoleSetPolicy",
    "Save an agent's policy",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    {
      maxPerTransactionUsd: "Optional, dollars.",
      dailyLimitUsd: "Optional, dollars.",
      approvalThresholdUsd: "Optional, dollars.",
      allowedCategories: "Optional, comma-separated.",
      allowedX402Hosts: "Optional, comma-separated host names, or *.",
    },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/credit",
    "consoleCreditAgent",
    "Credit an agent",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    { amount: "Dollars, at most two decimals.", reference: "Optional." },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/keys",
    "consoleRollAgentKey",
    "Roll an agent's API key",
    {
      200: HTML("The agent, with the new API key shown once and when the old one stops."),
      303: SEE_OTHER("back to the agent, with a notice, when the grace is refused"),
      404: PAGE_NOT_FOUND,
    },
    {
      graceSeconds: "Seconds the old key keeps working, 0 to 604800 (default 86400).",
    },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/freeze",
    "consoleFreezeAgent",
    "Freeze an agent",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    { reason: "Optional, up to 200 characters." },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/unfreeze",
    "consoleUnfreezeAgent",
    "Unfreeze an agent",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    {},
  ),
  page("get", "/console/ui/approvals", "consoleApprovalsPage", "Pending approvals", {
    200: HTML("Approvals waiting for a human."),
  }),
  page(
    "post",
    "/console/ui/approvals/:id/:decision{grant|reject}",
    "consoleDecideApproval",
    "Grant or reject an approval",
    { 303: SEE_OTHER("back to the approvals, with the outcome"), 404: PAGE_NOT_FOUND },
    {},
  ),
  page("get", "/console/ui/webhooks", "consoleWebhooksPage", "Webhook endpoints", {
    200: HTML("Endpoints and the creation form."),
  }),
  page(
    "post",
    "/console/ui/webhooks",
    "consoleCreateWebhook",
    "Add a webhook endpoint",
    { 200: HTML("The list, with the signing secret shown once (or the refusal).") },
    {
      url: "Receiving URL.",
      events: "Event kinds (repeatable); none means all.",
      merchantId: "Optional merchant.",
    },
  ),
  page("get", "/console/ui/webhooks/:id", "consoleWebhookPage", "An endpoint's deliveries", {
    200: HTML("Recent deliveries."),
    404: PAGE_NOT_FOUND,
  }),
  page("get", "/console/ui/webhooks/:id/deliveries/:deliveryId", "consoleDeliveryPage", "A delivery's attempts", {
    200: HTML("Every attempt of the delivery."),
  }),
  page(
    "post",
    "/console/ui/webhooks/:id/deliveries/:deliveryId/redeliver",
    "consoleRedeliver",
    "Send a delivery again",
    { 303: SEE_OTHER("back to the endpoint, with a notice") },
    {},
  ),
  page("get", "/console/ui/kyt", "consoleKytPage", "KYT screening", { 200: HTML("The screening form.") }),
  page(
    "post",
    "/console/ui/kyt",
    "consoleScreen",
    "Screen an address",
    { 200: HTML("The verdict.") },
    { address: "EVM address." },
  ),
  page("get", "/console/ui/transactions", "consoleTransactionsPage", "Transactions", {
    200: HTML("Audit events of a date range and the chain's verification."),
  }),
  {
    ...page("get", "/console/ui/transactions.csv", "consoleTransactionsCsv", "Transactions as CSV", {
      200: { description: "The audit chain as CSV.", contentType: "text/csv" },
      400: INVALID,
    }),
    query: ExportQuery,
  },
  {
    ...page("get", "/console/ui/payouts", "consolePayoutsPage", "Payouts", {
      200: HTML(
        "Every merchant's payouts, newest first (up to 100), with the totals by status; an unknown status shows them all.",
      ),
    }),
    query: PayoutPageQuery,
  },
  page("get", "/console/ui/charges/:chargeId", "consoleChargePage", "One charge and its refunds", {
    200: HTML("The charge, what of it is refunded and remains, its refunds oldest first, and the refund form."),
    404: HTML("No such charge: a page that says so."),
  }),
  page(
    "post",
    "/console/ui/charges/:chargeId/refunds",
    "consoleRefundCharge",
    "Refund a charge as its merchant",
    {
      200: HTML(
        "The charge with the refusal in plain words (the refund service's code in brackets), nothing refunded.",
      ),
      303: SEE_OTHER("back to the charge, with the refund in a notice"),
      404: HTML("No such charge: a page that says so."),
    },
    {
      amount: "Optional dollars with at most two decimals; empty refunds what remains.",
      seenRefundedMinor:
        "Optional: the charge's refunded cents the form was shown with; a different sum now refuses (a second submit).",
    },
  ),
  page("get", "/console/ui/users", "consoleUsersPage", "Console users", { 200: HTML("Who may sign in.") }),
  page(
    "post",
    "/console/ui/users",
    "consoleAddUserPage",
    "Allow an e-mail to sign in",
    { 303: SEE_OTHER("back to the users, with a notice") },
    { email: "E-mail address." },
  ),
  page("get", "/console/ui/treasury", "consoleTreasuryPage", "Treasury", {
    200: HTML(
      "The latest treasury check's figures, the stored checks as a chart of holdings against the ledger's expectation (in dollars) and as a table.",
    ),
  }),
  page(
    "post",
    "/console/ui/treasury/check",
    "consoleTreasuryCheck",
    "Check the treasury now",
    { 303: SEE_OTHER("back to the treasury, with the check's status in a notice") },
    {},
  ),
  page(
    "post",
    "/console/ui/treasury/fundings",
    "consoleTreasuryFunding",
    "Book a funding of the treasury as the operator's float",
    {
      200: HTML("The treasury page with the refusal in plain words (its code in brackets), nothing booked."),
      303: SEE_OTHER("back to the treasury, with the booked amount in a notice"),
    },
    { transaction: "The transaction's hash: 0x and 64 hex digits." },
  ),
];
