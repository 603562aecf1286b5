import { z } from "zod";
import { EvmAddress, named, Timestamp } from "../lib/api-shapes";

/** Response bodies: Address screening and the operators' blocklist. */

export const KytResult = named("KytResult", z.strictObject({ verdict: z.enum(["pass", "block"]), reason: z.string() }));

export const BlocklistEntry = named(
  "BlocklistEntry",
  z.strictObject({ address: EvmAddress, reason: z.string(), addedBy: z.string(), createdAt: Timestamp }),
);

export const BlocklistList = named("BlocklistList", z.strictObject({ entries: z.array(BlocklistEntry) }));

export const BlocklistAdded = named("BlocklistAdded", z.strictObject({ entry: BlocklistEntry }));
