import { z } from "zod";
import type { AgentX402PaymentView } from "../agents/x402-payments";
import { keepAnswer, reserveKeyOrWait } from "../auth/idempotency";
import { settingsOf } from "../config/env";
import { ApiError, refusalAgain } from "../lib/errors";
import { type Fetched, type GuardedRequest, guardedFetch, MAX_FETCHED_BYTES } from "../lib/guarded-fetch";
import { payX402Resource } from "../x402/outbound/pay";
import { isHttpUrl, MAX_URL_LENGTH, type PaymentRequired } from "../x402/outbound/request";
import { paymentRequiredOf } from "../x402/outbound/terms-of-402";
import type { ToolContext, ToolDefinition } from "./define";
import { IdempotencyKeyArg, toolKey, usdOfBaseUnits } from "./paying";

const TOOL = "pay_x402_resource";

/** Headers the tool sets itself, or that fetch owns: an agent naming one is refused as invalid input. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "connection",
  "transfer-encoding",
  "x-payment",
  "payment-signature",
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;

export const PayX402Input = z
  .object({
    url: z.string().max(MAX_URL_LENGTH).refine(isHttpUrl, "must be an absolute http(s) URL"),
    method: z.enum(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]).default("GET"),
    headers: z
      .record(
        z
          .string()
          .regex(HEADER_NAME, "an HTTP header name")
          .refine((name) => !RESERVED_HEADERS.has(name.toLowerCase()), "set by the tool itself"),
        z
          .string()
          .max(8192)
          .regex(/^[^\r\n\0]*$/, "one line"),
      )
      .refine((headers) => Object.keys(headers).length <= 32, "at most 32 headers")
      .optional(),
    body: z.string().max(MAX_FETCHED_BYTES).optional(),
    idempotencyKey: IdempotencyKeyArg,
  })
  .strict()
  .refine((input) => input.body === undefined || !["GET", "HEAD"].includes(input.method), {
    message: "GET and HEAD take no body",
    path: ["body"],
  });
type PayX402Input = z.output<typeof PayX402Input>;

/** What POST /agent/x402/payments answers with 201. */
interface PaymentMade {
  payment: AgentX402PaymentView;
  header: { name: string; value: string };
}

/** What it answers with 402 when the payment is over the approval threshold: nothing signed or debited. */
interface PaymentHeld {
  pendingApproval: true;
  reason: string;
  approvalId: string;
  expiresAt: string;
}

/** A send the guard refused or that got no answer, as the tool's error. */
function unfetched(fetched: Extract<Fetched, { ok: false }>): ApiError {
  const { reason, url } = fetched;
  const refused = !["timeout", "too_many_redirects"].includes(reason) && !reason.startsWith("fetch_failed");
  return refused
    ? new ApiError(400, "resource_url_forbidden", { reason, url })
    : new ApiError(502, "resource_unreachable", { reason, url });
}

async function send(ctx: ToolContext, request: GuardedRequest): Promise<Extract<Fetched, { ok: true }>> {
  const fetched = await guardedFetch(request, settingsOf(ctx.env));
  if (!fetched.ok) throw unfetched(fetched);
  return fetched;
}

/**
 * Pays the terms through the one path of POST /agent/x402/payments. With an `idempotencyKey` the
 * payment is kept under it as the route keeps it (in the wallet's batch): the same key and
 * arguments answer the same payment and header, never a second one.
 */
async function pay(
  ctx: ToolContext,
  { idempotencyKey, ...args }: PayX402Input,
  resource: string,
  paymentRequired: PaymentRequired,
): Promise<PaymentMade | PaymentHeld> {
  const settings = settingsOf(ctx.env);
  const request = { resource, paymentRequired };
  if (idempotencyKey === undefined)
    return JSON.parse((await payX402Resource(ctx.env, settings, ctx.agentId, request, undefined)).body);
  const { db, keyed } = await toolKey(ctx.env, ctx.agentId, TOOL, idempotencyKey, args);
  const material = settings.webhookSecretsKey;
  const reservation = await reserveKeyOrWait(db, material, keyed);
  const answer =
    reservation.kind === "replay"
      ? reservation.answer
      : await keepAnswer(db, material, reservation.slot, async () => {
          let reply: { status: number; body: string };
          try {
            reply = await payX402Resource(ctx.env, settings, ctx.agentId, request, reservation.slot);
          } catch (error) {
            // A refusal is the key's answer as the route's would be; anything else frees the key.
            if (!(error instanceof ApiError) || error.status >= 500) throw error;
            reply = { status: error.status, body: JSON.stringify({ ...error.extra, error: error.error }) };
          }
          return { ...reply, contentType: "application/json", body: async () => reply.body, text: reply.body };
        });
  const text = "text" in answer ? answer.text : answer.body;
  const body = JSON.parse(text);
  if (answer.status === 402 && body.pendingApproval === true) return body as PaymentHeld;
  if (answer.status !== 201) throw refusalAgain(answer.status, body);
  return body as PaymentMade;
}

/**
 * Fetches the URL; on a 402 with x402 terms, pays them and sends the request once more with the
 * payment's header. A 402 after paying is answered as it is: the tool never pays twice in one call.
 */
async function payResource(ctx: ToolContext, input: PayX402Input) {
  const request: GuardedRequest = {
    url: input.url,
    method: input.method,
    headers: new Headers(input.headers),
    body: input.body ?? null,
  };
  let answer = await send(ctx, request);
  let payment: AgentX402PaymentView | null = null;
  const terms = paymentRequiredOf(answer.status, answer.headers, answer.body);
  if (terms) {
    // The resource is where the 402 came from (after redirects): the paid request goes there.
    const paid = await pay(ctx, input, answer.request.url, terms);
    // Held for a human: nothing was paid, so nothing is sent again; the agent calls again once it is granted.
    if ("pendingApproval" in paid)
      return { body: { ...paid, status: answer.status, payment: null }, payment: null, held: paid };
    payment = paid.payment;
    const headers = new Headers(answer.request.headers);
    headers.set(paid.header.name, paid.header.value);
    answer = await send(ctx, { ...answer.request, headers }).catch((error: unknown) => {
      // The wallet paid before this send: an error here must still name the payment, or an agent
      // reading "nothing happened" pays again. The same idempotencyKey sends the same header again.
      if (error instanceof ApiError) throw new ApiError(error.status, error.error, { ...error.extra, payment });
      throw error;
    });
  }
  const body = {
    status: answer.status,
    contentType: answer.headers.get("content-type"),
    body: answer.body,
    truncated: answer.truncated,
    payment,
  };
  return { body, payment, held: null };
}

export const payX402Tool: ToolDefinition<typeof PayX402Input> = {
  name: TOOL,
  title: "Fetch a URL, paying its x402 paywall",
  description: `Fetches a URL (method, headers and body optional) and, if it answers 402 with x402 payment terms, pays them from your wallet under your policy (your allowedX402Hosts must name the host) and sends the request once more with the payment. Answers { status, contentType, body, truncated, payment }: the last answer's status and content type, its body as text (at most 256 KB; truncated says it was cut), and the payment made (null when none was needed). A 402 after paying is returned as it is: nothing is paid twice in one call. Over your approval threshold: { pendingApproval, reason, approvalId, expiresAt, status: 402, payment: null }, nothing paid; once a console user grants it, the same call (same url, same terms) with a new idempotencyKey pays. Only public https URLs are fetched; redirects are followed up to 3 times, each to a public address. Refused: an error result (403 x402_host_not_allowed, 402 policy or balance, 400 resource_url_forbidden, 502 resource_unreachable); an error after paying (the paid request refused or unanswered) carries the payment: it was made, so do not pay again, repeat with the same idempotencyKey. Retries: send an idempotencyKey and repeat a lost call with the SAME key and arguments: the same payment is sent again, never a second one.`,
  input: PayX402Input,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(ctx, input) {
    const { body, payment, held } = await payResource(ctx, input);
    if (held)
      return {
        body,
        summary: `${input.method} ${input.url}: held for human approval (${held.reason}): approval ${held.approvalId}, expires ${held.expiresAt}. Nothing was paid; once a console user grants it, call again with the same url (and a new idempotencyKey).`,
      };
    const paid =
      payment === null
        ? "no payment needed"
        : `paid ${usdOfBaseUnits(payment.amountBaseUnits)} (${payment.paymentId}) to ${payment.payTo}`;
    return { body, summary: `${input.method} ${input.url}: ${body.status}, ${paid}.` };
  },
};
