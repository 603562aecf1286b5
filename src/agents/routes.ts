import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import { ChargeIdParam } from "../charges/routes";
import { RollKeyBody } from "../keys/roll";
import { rollKeyResponse } from "../keys/roll-response";
import { placementOf } from "../ledger/place";
import { codeWith } from "../lib/error-codes";
import { ApiError } from "../lib/errors";
import { amountMinor } from "../lib/money";
import { pathId, validate } from "../lib/validation";
import { payOutcomeResponse } from "./outcomes";
import { normalizePolicy, PolicySchema } from "./policy";
import { agentView, balanceView, createAgent, getAgentAtHome, listAgentsAtHome } from "./service";
import { walletOf } from "./wallet.do";
import { creditBody } from "./wallet-credit";

export const CreateAgentBody = z
  .object({ name: z.string().trim().min(1).max(200), policy: PolicySchema.optional() })
  .strict();
export const CreditBody = z
  .object({ amountUsdCents: amountMinor, reference: z.string().trim().min(1).max(200).optional() })
  .strict();
export const AgentParam = z.object({ agentId: pathId });
export const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(100) });
export const FreezeBody = z.object({ reason: z.string().trim().min(1).max(200).optional() }).strict();
/** Unfreeze takes nothing: no body, or `{}`; anything else is refused like any other body, never ignored. */
export const NoBody = z.object({}).strict();

export const agentRoutes = new Hono<AppEnv>()
  .post("/console/agents", requireActor("console"), validate("json", CreateAgentBody), async (c) => {
    const body = c.req.valid("json");
    const created = await createAgent(
      c.env,
      placementOf(c.env).control.db,
      { name: body.name, policy: normalizePolicy(body.policy) },
      (created) => answerInBatch(c, 201, created),
    );
    return c.json(created, 201);
  })
  .get("/console/agents", requireActor("console"), validate("query", ListQuery), async (c) => {
    const rows = await listAgentsAtHome(c.env, placementOf(c.env).control.db, c.req.valid("query").limit);
    return c.json({ agents: rows.map(agentView) });
  })
  .get("/console/agents/:agentId", requireActor("console"), validate("param", AgentParam), async (c) => {
    const agent = await getAgentAtHome(c.env, placementOf(c.env).control.db, c.req.valid("param").agentId);
    if (!agent) throw new ApiError(404, "agent_not_found");
    return c.json(agentView(agent));
  })
  .put(
    "/console/agents/:agentId/policy",
    requireActor("console"),
    validate("param", AgentParam),
    validate("json", PolicySchema),
    async (c) => {
      const { agentId } = c.req.valid("param");
      const policy = normalizePolicy(c.req.valid("json"));
      if (!(await walletOf(c.env, agentId).setPolicy(agentId, policy))) throw new ApiError(404, "agent_not_found");
      return c.json({ policy });
    },
  )
  .post(
    "/console/agents/:agentId/credits",
    // The credit stores its answer in its batch, with the agent's money.
    requireActor("console", { money: "writes" }),
    validate("param", AgentParam),
    validate("json", CreditBody),
    async (c) => {
      const { agentId } = c.req.valid("param");
      const body = c.req.valid("json");
      const result = await walletOf(c.env, agentId).credit(
        agentId,
        body.amountUsdCents,
        body.reference ?? null,
        actorOf(c.get("actor"), "console").email,
        c.get("idempotency"),
      );
      if (!result.ok)
        throw result.reason === "agent_not_found"
          ? new ApiError(404, "agent_not_found")
          : new ApiError(409, codeWith(409, result.reason));
      return c.json(creditBody(result.balanceMinor));
    },
  )
  .post(
    "/console/agents/:agentId/keys",
    requireActor("console"),
    validate("param", AgentParam),
    validate("json", RollKeyBody, { optionalBody: true }),
    async (c) => {
      return rollKeyResponse(c, { kind: "agent", id: c.req.valid("param").agentId }, c.req.valid("json").graceSeconds);
    },
  )
  .post(
    "/console/agents/:agentId/freeze",
    requireActor("console"),
    validate("param", AgentParam),
    validate("json", FreezeBody, { optionalBody: true }),
    async (c) => {
      const { agentId } = c.req.valid("param");
      const outcome = await walletOf(c.env, agentId).setFrozen(
        agentId,
        true,
        c.req.valid("json").reason ?? null,
        actorOf(c.get("actor"), "console").email,
      );
      if (outcome === "not_found") throw new ApiError(404, "agent_not_found");
      return c.json({ agentId, frozen: true });
    },
  )
  .post(
    "/console/agents/:agentId/unfreeze",
    requireActor("console"),
    validate("param", AgentParam),
    validate("json", NoBody, { optionalBody: true }),
    async (c) => {
      const { agentId } = c.req.valid("param");
      const outcome = await walletOf(c.env, agentId).setFrozen(
        agentId,
        false,
        null,
        actorOf(c.get("actor"), "console").email,
      );
      if (outcome === "not_found") throw new ApiError(404, "agent_not_found");
      return c.json({ agentId, frozen: false });
    },
  )
  .get("/balance", requireActor("agent"), async (c) => {
    const balance = await balanceView(c.env, placementOf(c.env).control.db, actorOf(c.get("actor"), "agent").agentId);
    if (!balance) throw new ApiError(404, "agent_not_found");
    return c.json(balance);
  })
  // An agent pays a charge from its wallet: the wallet, not the charge, decides (policy, balance, approval).
  .post(
    "/charges/:chargeId/pay",
    // Its answer is stored with the paying agent's money; a retry finds its payment of the charge again in the wallet.
    requireActor("agent", { money: "writes" }),
    validate("param", ChargeIdParam),
    async (c) => {
      const { agentId } = actorOf(c.get("actor"), "agent");
      const outcome = await walletOf(c.env, agentId).payCharge(
        agentId,
        c.req.valid("param").chargeId,
        c.get("idempotency"),
      );
      return payOutcomeResponse(c, outcome, { kind: "charge" }, "agent");
    },
  );
