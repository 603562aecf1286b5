import { json, type Operation } from "../lib/api-operation";
import { PublishedKeySet } from "./responses";

/** Proofs: the public keys that receipts and audit checkpoints are verified with, offline. */
export const PROOF_OPERATIONS: Operation[] = [
  {
    method: "get",
    path: "/.well-known/jwks.json",
    operationId: "getPublishedKeys",
    summary: "The keys receipts and checkpoints are signed with",
    description:
      "A JSON Web Key Set of public keys: the key that signs now comes first, and keys rotated out stay published while what they signed may still be checked. Each receipt and checkpoint is a compact JWS naming its key by `kid`.",
    tag: "Proofs",
    auth: "public",
    responses: { 200: json(PublishedKeySet, "The published keys.") },
  },
];
