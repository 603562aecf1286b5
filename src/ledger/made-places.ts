import type { Place, Placement } from "./place";

/**
 * The place of an object this deployment made, found by its id as read from its own rows (a
 * transfer's owner, a payment's charge). Such an id always names a shard the deployment runs; one
 * that does not is a configuration error (a shard taken away under its rows), never "not found".
 */
export function placeOfMadeId(place: Placement, id: string): Place {
  const at = place.ofId(id);
  if (!at) throw new Error(`${id} lives in a ledger shard this deployment does not run`);
  return at;
}

/** What a log line says of a place, for the operator who reads it: its shard's number. */
export const placeForLog = (at: Place) => ({ shard: at.shard });
