/**
 * The document's tags, and the group each belongs to: the service's core API
 * (Interface), the console's operator API (Operations), what the service adds
 * for operators and agents (Service extras), and the web console's pages.
 */
export const TAGS = [
  {
    name: "Merchants",
    group: "Interface",
    description: "Merchant registration, the merchant's own record and payout address.",
  },
  {
    name: "Charges",
    group: "Interface",
    description: "Charges and paying them from an agent wallet.",
  },
  {
    name: "x402",
    group: "Interface",
    description:
      "On-chain payment by x402 for charges and checkout links; no credential, the payer is the signature. Each charge and link has a receiving address of its own.",
  },
  {
    name: "Checkout links",
    group: "Interface",
    description: "Reusable links; each payment materializes its own charge.",
  },
  {
    name: "PayLinks",
    group: "Interface",
    description: "Budgets an agent pre-authorizes once, drawn down by the merchant.",
  },
  {
    name: "Approvals",
    group: "Interface",
    description: "Grant or reject a payment held for a human because it is over the agent's approval threshold.",
  },
  {
    name: "Webhook endpoints",
    group: "Interface",
    description: "Signed webhook endpoints and their deliveries (HMAC-SHA256 in `X-Service-Signature`).",
  },
  {
    name: "Agent wallet",
    group: "Interface",
    description: "The agent's balance, deposit address and whether an operator froze the wallet.",
  },
  { name: "KYT", group: "Interface", description: "Address screening." },
  {
    name: "Refunds",
    group: "Service extras",
    description:
      "Money given back on a paid charge: to the paying agent's wallet, or on chain to the x402 payer, at most once.",
  },
  {
    name: "Payouts",
    group: "Service extras",
    description:
      "A merchant's balance sent on chain to its payout address, from the service's settlement address, at most once.",
  },
  { name: "Export", group: "Interface", description: "The audit chain as CSV." },
  {
    name: "Proofs",
    group: "Interface",
    description:
      "What anyone can check offline: signed receipts of payments, payouts and refunds, the keys they are signed with, and the audit chain's signed checkpoints.",
  },
  {
    name: "Console sign-in",
    group: "Operations",
    description: "E-mail code and Cloudflare Access sign-in for console sessions.",
  },
  {
    name: "Console agents",
    group: "Operations",
    description: "Agents, their policies, keys, freezes and manual top-ups.",
  },
  { name: "Console merchants", group: "Operations", description: "The console's merchant list and key rolls." },
  { name: "Console approvals", group: "Operations", description: "Approvals waiting for a human." },
  { name: "Console payouts", group: "Operations", description: "Every merchant's payouts, by status." },
  {
    name: "Console treasury",
    group: "Operations",
    description: "The chain's holdings reconciled against the ledger, now and as stored checks.",
  },
  {
    name: "Operator extras",
    group: "Service extras",
    description:
      "What the service adds for operators: the audit chain, the KYT blocklist, console users, sign-out, endpoint removal, secret rotation and redelivery.",
  },
  {
    name: "MCP",
    group: "Service extras",
    description: "The Model Context Protocol endpoint for agents (streamable HTTP, stateless JSON answers).",
  },
  { name: "Documentation", group: "Service extras", description: "This document and its reference page." },
  {
    name: "Console pages",
    group: "Console pages",
    description:
      "The server-rendered web console (text/html). A page session is the console token in the `console_session` cookie; every POST carries the page's `_csrf` field.",
  },
] as const;
