import { z } from "zod";
import { balanceView } from "../agents/service";
import { walletOf } from "../agents/wallet.do";
import { ChargeIdParam } from "../charges/routes";
import { chargeView, getCharge, listAgentPayments } from "../charges/service";
import { TokenParam } from "../checkout/routes";
import { CHECKOUT_PAID_VIEW, payCheckoutLink } from "../checkout/service";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { CodeParam } from "../paylinks/routes";
import {
  acceptPaylinkByCode,
  acceptRefusal,
  dbOfPaylink,
  paylinkByCode,
  paylinkPublicView,
  paylinkUsage,
} from "../paylinks/service";
import { defineTool, type ServedTool, type ToolAnnotations, type ToolDefinition } from "./define";
import { IdempotencyKeyArg, payOnce, RETRY_RULE, receiptOf, usd, usdOfBaseUnits } from "./paying";
import { payX402Tool } from "./x402-tool";

const READ: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};

/** Strict copies of the routes' own schemas: same fields and bounds, and an unknown field (an `agentId`, say) is refused. */
const ChargeInput = ChargeIdParam.strict();
/** The paying tools also take an `idempotencyKey` (see ./paying.ts). */
const PayChargeInput = ChargeIdParam.extend({ idempotencyKey: IdempotencyKeyArg }).strict();
const PayCheckoutInput = TokenParam.extend({ idempotencyKey: IdempotencyKeyArg }).strict();
const PaylinkInput = CodeParam.strict();
const NoInput = z.object({}).strict();
/** No route lists an agent's payments; this tool's own bound (docs/mcp.md). */
const RecentPaymentsInput = z.object({ limit: z.number().int().min(1).max(100).default(20) }).strict();

const getBalance: ToolDefinition<typeof NoInput> = {
  name: "get_balance",
  title: "Get my balance",
  description:
    "Your wallet: agentId, balanceMinor (integer USD cents), currency and depositAddress (where on-chain stablecoin tops it up), frozen (true while an operator has frozen your wallet: nothing can be paid). Same as GET /balance.",
  input: NoInput,
  annotations: READ,
  async run(ctx) {
    const balance = await balanceView(ctx.env, placementOf(ctx.env).control.db, ctx.agentId);
    if (!balance) throw new ApiError(404, "agent_not_found");
    return {
      body: balance,
      summary: `Balance: ${usd(balance.balanceMinor, balance.currency)}.`,
    };
  },
};

const getChargeTool: ToolDefinition<typeof ChargeInput> = {
  name: "get_charge",
  title: "Get a charge",
  description:
    "Reads a charge by its chargeId (chg_...): amountMinor in USD cents, status pending or paid, method and reference once paid, and once paid its signed receipt (receipt: a compact JWS, verifiable offline against /.well-known/jwks.json). After a payment's answer was lost or unclear, read its charge here: paid means it is done, do not pay again. Same as GET /charges/:chargeId and GET /charges/:chargeId/receipt.",
  input: ChargeInput,
  annotations: READ,
  async run(ctx, input) {
    // As GET /charges/:chargeId: the charge id is the capability to read it, and names where it lives.
    const at = placementOf(ctx.env).ofId(input.chargeId);
    const charge = at ? await getCharge(at.db, input.chargeId) : null;
    if (!charge) throw new ApiError(404, "charge_not_found");
    const receipt = charge.status === "paid" ? await receiptOf(ctx, charge.id) : null;
    return {
      body: receipt ? { ...chargeView(charge), receipt } : chargeView(charge),
      summary: `Charge ${charge.id}: ${usdOfBaseUnits(String(charge.amountBaseUnits), charge.currency)}, ${charge.status}.`,
    };
  },
};

const payChargeTool: ToolDefinition<typeof PayChargeInput> = {
  name: "pay_charge",
  title: "Pay a charge",
  description: `Pays a pending charge from your wallet, under your policy. Paid: { paid, charge, merchantBalanceMinor, receipt } (charge.chargeId names what you paid; receipt: the signed receipt, a compact JWS verifiable offline against /.well-known/jwks.json). Over your approval threshold: { pendingApproval, reason, approvalId, expiresAt, charge }, nothing charged (calling again returns the same approval). Refused: an error result with the reason (402 policy or balance, 409 not pending, 404 unknown, 403 agent_frozen: an operator froze your wallet, do not retry). ${RETRY_RULE} Same as POST /charges/:chargeId/pay with an Idempotency-Key.`,
  input: PayChargeInput,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  run: (ctx, input) =>
    payOnce(ctx, "pay_charge", input, { kind: "charge" }, (slot) =>
      walletOf(ctx.env, ctx.agentId).payCharge(ctx.agentId, input.chargeId, slot),
    ),
};

const payCheckoutLinkTool: ToolDefinition<typeof PayCheckoutInput> = {
  name: "pay_checkout_link",
  title: "Pay a checkout link",
  description: `Pays a merchant's checkout link (the token in /checkout/<token>) from your wallet, under your policy. Every call without an idempotencyKey is a new payment: a new charge is created against the link each time, so always send one. Paid: { paid, charge, receipt } (charge.chargeId names the new charge; receipt as for pay_charge). Over your approval threshold: { pendingApproval, reason, approvalId, expiresAt, charge }. Refused: an error result (402 policy or balance, 409 checkout_link_disabled, 404 checkout_link_not_found, 403 agent_frozen: an operator froze your wallet, do not retry). ${RETRY_RULE} Same as POST /checkout/:token/pay with an Idempotency-Key.`,
  input: PayCheckoutInput,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  run: (ctx, input) =>
    payOnce(ctx, "pay_checkout_link", input, CHECKOUT_PAID_VIEW, (slot) =>
      payCheckoutLink(ctx.env, ctx.agentId, input.token, slot),
    ),
};

const viewPaylink: ToolDefinition<typeof PaylinkInput> = {
  name: "view_paylink",
  title: "View a PayLink",
  description:
    "Shows a PayLink before you accept it (the code in /pl/<code>): business, label, budgetMinor, perChargeMinor, maxUses, uses, remainingMinor, expiresAt, status. Same as GET /pl/:code.",
  input: PaylinkInput,
  annotations: READ,
  async run(ctx, input) {
    const db = dbOfPaylink(ctx.env, input.code);
    const found = await paylinkByCode(db, input.code);
    if (!found) throw new ApiError(404, "paylink_not_found");
    const view = paylinkPublicView(found.paylink, found.merchantName, await paylinkUsage(db, found.paylink.id));
    const label = view.label === null ? "" : ` "${view.label}"`;
    return {
      body: view,
      summary: `PayLink ${view.paylinkId}${label} from ${view.business}: budget ${usd(view.budgetMinor)}, ${view.status}.`,
    };
  },
};

const acceptPaylinkTool: ToolDefinition<typeof PaylinkInput> = {
  name: "accept_paylink",
  title: "Accept a PayLink",
  description:
    "Accepts a PayLink: authorizes its merchant to draw from your wallet up to its budget, within your hard policy limits. Answers { grantId, paylink }; accepting again returns the same grant. Refused: 409 paylink_expired, 404 paylink_not_found, 403 agent_frozen (your wallet is frozen by an operator). Same as POST /pl/:code/accept.",
  input: PaylinkInput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(ctx, input) {
    const accepted = await acceptPaylinkByCode(ctx.env, input.code, ctx.agentId);
    if (accepted.kind !== "accepted") throw acceptRefusal(accepted);
    const { grantId, paylink } = accepted;
    return {
      body: { grantId, paylink },
      summary: `Accepted PayLink ${paylink.paylinkId}: grant ${grantId}, ${usd(paylink.remainingMinor)} left.`,
    };
  },
};

const listRecentPayments: ToolDefinition<typeof RecentPaymentsInput> = {
  name: "list_recent_payments",
  title: "List my recent payments",
  description:
    "Your paid charges (wallet, checkout link and PayLink payments), most recently paid first: { charges: [charge...] }, each in the shape of get_charge. limit 1 to 100, default 20.",
  input: RecentPaymentsInput,
  annotations: READ,
  async run(ctx, input) {
    const rows = await listAgentPayments(ctx.env, ctx.agentId, input.limit);
    return {
      body: { charges: rows.map(chargeView) },
      summary: `${rows.length} recent payment${rows.length === 1 ? "" : "s"}.`,
    };
  },
};

/** Every tool the endpoint serves, in the order `tools/list` shows them. */
export const TOOLS: readonly ServedTool[] = [
  defineTool(getBalance),
  defineTool(getChargeTool),
  defineTool(payChargeTool),
  defineTool(payCheckoutLinkTool),
  defineTool(viewPaylink),
  defineTool(acceptPaylinkTool),
  defineTool(listRecentPayments),
  defineTool(payX402Tool),
];
