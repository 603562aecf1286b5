import { RollKeyBody } from "../keys/roll";
import { error, INVALID, json, type Operation, OVERLOADED } from "../lib/api-operation";
import { body } from "../lib/api-shapes";
import { PolicySchema } from "./policy";
import {
  Agent,
  AgentCreated,
  AgentFrozen,
  AgentKeyRolled,
  AgentList,
  Balance,
  CreditApplied,
  PolicySet,
} from "./responses";
import { AgentParam, CreateAgentBody, CreditBody, FreezeBody, ListQuery, NoBody } from "./routes";

body("PolicyInput", PolicySchema);

/** Agents, as the console manages them, and the agent's own balance. */
export const AGENT_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/console/agents",
    operationId: "createAgent",
    summary: "Create an agent",
    description: "Returns the agent's API key, shown once.",
    tag: "Console agents",
    auth: "console",
    body: body("CreateAgentRequest", CreateAgentBody),
    responses: { 201: json(AgentCreated, "Created."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/agents",
    operationId: "listAgents",
    summary: "List agents",
    tag: "Console agents",
    auth: "console",
    query: ListQuery,
    responses: { 200: json(AgentList, "Agents."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/agents/:agentId",
    operationId: "getAgent",
    summary: "Read an agent",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    responses: { 200: json(Agent, "The agent."), 404: error("`agent_not_found`.", "agent_not_found") },
  },
  {
    method: "put",
    path: "/console/agents/:agentId/policy",
    operationId: "setAgentPolicy",
    summary: "Replace an agent's policy",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    body: PolicySchema,
    responses: {
      200: json(PolicySet, "The stored policy."),
      400: INVALID,
      404: error("`agent_not_found`.", "agent_not_found"),
    },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/credits",
    operationId: "creditAgent",
    summary: "Top up an agent's wallet",
    description: "A manual credit, written to the audit chain.",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    body: body("CreditAgentRequest", CreditBody),
    responses: {
      200: json(CreditApplied, "The new balance."),
      400: INVALID,
      404: error("`agent_not_found`.", "agent_not_found"),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/keys",
    operationId: "rollAgentKey",
    summary: "Roll an agent's API key",
    description:
      "A new `svc_sk_` key, shown once. The key it replaces keeps working for `graceSeconds` (default 86,400; 0 ends it at once), then answers 401; at most two keys work at a time, so rolling again ends the older one's grace at once. An ended key stops working everywhere within 5 seconds. Written to the audit chain with the console user.",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    body: body("RollKeyRequest", RollKeyBody),
    bodyOptional: true,
    responses: {
      201: json(AgentKeyRolled, "The new key, shown once."),
      400: INVALID,
      404: error("`agent_not_found`.", "agent_not_found"),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/freeze",
    operationId: "freezeAgent",
    summary: "Freeze an agent",
    description:
      "Nothing of the agent's money moves until it is unfrozen: its payments (`/charges/:id/pay`, `/checkout/:token/pay`, `/pl/:code/accept`, the MCP paying tools) answer 403 `agent_frozen`, a merchant's draw on its grant and the grant of its approvals 409 `agent_frozen` (the approval stays pending). Every payment lands before the freeze or is refused after it. Reads keep working. Freezing a frozen agent changes nothing. Written to the audit chain with the console user and the reason.",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    body: body("FreezeAgentRequest", FreezeBody),
    bodyOptional: true,
    responses: {
      200: json(AgentFrozen, "Frozen."),
      400: INVALID,
      404: error("`agent_not_found`.", "agent_not_found"),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/unfreeze",
    operationId: "unfreezeAgent",
    summary: "Unfreeze an agent",
    description: "Its payments are decided by its policy again. Written to the audit chain with the console user.",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    body: body("UnfreezeAgentRequest", NoBody),
    bodyOptional: true,
    responses: {
      200: json(AgentFrozen, "Not frozen."),
      400: INVALID,
      404: error("`agent_not_found`.", "agent_not_found"),
      503: OVERLOADED,
    },
  },
  {
    method: "get",
    path: "/balance",
    operationId: "getBalance",
    summary: "The agent's balance",
    tag: "Agent wallet",
    auth: "agent",
    responses: { 200: json(Balance, "Balance, on-chain deposit address, and whether the wallet is frozen.") },
  },
];
