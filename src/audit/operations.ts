import { json, INVALID, type Operation } from "../lib/api-operation";
import { AuditPage, ChainVerdict } from "./responses";
import { ExportQuery, PageQuery } from "./routes";

/** The audit chain: CSV export, pages and verification. */
export const AUDIT_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/export/transactions.csv",
    operationId: "exportTransactions",
    summary: "Export the audit chain as CSV",
    description:
      "`from` and `to` are inclusive UTC days; the default is the last 30 days. Each row carries its sequence number and event hash.",
    tag: "Export",
    auth: "console",
    query: ExportQuery,
    responses: {
      200: {
        description:
          "CSV: seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash",
        contentType: "text/csv",
      },
      400: INVALID,
    },
  },
  {
    method: "get",
    path: "/console/audit",
    operationId: "auditPage",
    summary: "Page through the audit chain",
    tag: "Operator extras",
    auth: "console",
    query: PageQuery,
    responses: { 200: json(AuditPage, "Events after `afterSeq`."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/audit/verify",
    operationId: "verifyAuditChain",
    summary: "Verify the audit chain",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(ChainVerdict, "The verdict; names the first broken row, if any.") },
  },
];
