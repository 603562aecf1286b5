import { z } from "zod";

// Where audit checkpoints are anchored: the AuditAnchor contract (contracts/AuditAnchor.sol) on the
// x402 chain, deployed once by the operator. Without it checkpoints are signed and kept, not anchored.

export const auditAnchorShape = {
  AUDIT_ANCHOR_ADDRESS: z
    .string()
    .trim()
    .regex(/^0x[a-fA-F0-9]{40}$/, "must be the EVM address of the AuditAnchor contract")
    .optional(),
};

type Parsed = { AUDIT_ANCHOR_ADDRESS?: string | undefined };

export const auditAnchorSettings = (s: Parsed): { auditAnchor: `0x${string}` | null } => ({
  auditAnchor: (s.AUDIT_ANCHOR_ADDRESS?.toLowerCase() as `0x${string}` | undefined) ?? null,
});
