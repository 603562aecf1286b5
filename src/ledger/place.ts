import type { Env } from "../config/env";
import { settingsOf } from "../config/settings";
import { dbOfShard, shardNumbers, shardOfId } from "../db/shards";
import { homeShard, type OwnerKind, placeShard, UnknownOwner } from "./directory";
import { type CommitResult, ledgerOf } from "./ledger.do";
import type { CommitPlan } from "./plan";

/**
 * Where an object's rows and money live: one ledger shard's database and its sequencer. Domains hold
 * places, never shard numbers: they read and write `db`, commit plans with `commit`, and make the ids
 * of new objects with `newId(kind, place)`, which tags them with the place (lib/ids.ts).
 */
export interface Place {
  /** The shard's database: reads, and writes that move no money. */
  readonly db: D1Database;
  /** Runs a plan as one batch in this shard's sequencer. */
  commit(plan: CommitPlan): Promise<CommitResult>;
  /** The control database's place (shard 0): identities, keys, the directory, webhooks, console state. */
  readonly isControl: boolean;
  /** The shard's number: what an id made here carries. Only src/ledger and src/db reason about it. */
  readonly shard: number;
}

/**
 * Where things live in this deployment, built once per env (a request's or a job's): the control
 * database, the home of each merchant and agent (from the shard directory), the place an id names,
 * and every place at once for the jobs and views that walk them all.
 */
export interface Placement {
  /** Shard 0, also the control database. */
  readonly control: Place;
  /** More than one shard runs: a payment may cross two. */
  readonly sharded: boolean;
  /** The agent's home. An agent the directory does not know throws `UnknownOwner`. */
  ofAgent(agentId: string): Promise<Place>;
  /** The merchant's home. A merchant the directory does not know throws `UnknownOwner`. */
  ofMerchant(merchantId: string): Promise<Place>;
  /** The owner's home, or null for an owner the directory does not know (it does not exist). */
  ofKnown(kind: OwnerKind, ownerId: string): Promise<Place | null>;
  /** The place an id's object lives in (its tag), or null for a shard this deployment does not run. */
  ofId(id: string): Place | null;
  /** Where a new merchant or agent goes (LEDGER_SHARD_PLACEMENT). */
  forNewOwner(): Place;
  /** Every place this deployment runs, control first. */
  each(): Place[];
}

const placements = new WeakMap<object, Placement>();

/** The placement of this env's deployment (cached per env object, as the settings are). */
export function placementOf(env: Env): Placement {
  const known = placements.get(env);
  if (known) return known;
  const count = settingsOf(env).ledgerShards;
  const places = shardNumbers(env, count).map((shard) => placeAt(env, shard));
  const at = (shard: number) => places[shard]!;
  const ofOwner = async (kind: OwnerKind, ownerId: string) =>
    // With one shard every owner lives in control, whatever the directory says or lacks.
    count === 1 ? at(0) : at(await homeShard(env, kind, ownerId));
  const placement: Placement = {
    control: at(0),
    sharded: count > 1,
    ofAgent: (agentId) => ofOwner("agent", agentId),
    ofMerchant: (merchantId) => ofOwner("merchant", merchantId),
    async ofKnown(kind, ownerId) {
      try {
        return await ofOwner(kind, ownerId);
      } catch (error) {
        if (error instanceof UnknownOwner) return null;
        throw error;
      }
    },
    ofId: (id) => places[shardOfId(id)] ?? null,
    forNewOwner: () => at(placeShard(env)),
    each: () => places,
  };
  placements.set(env, placement);
  return placement;
}

/**
 * The env of a job run for one place (the place `label` names, `shardLabel`'s number): its
 * placement walks that place alone (`each()`), and answers every other question (an owner's home, an
 * id's place, control) as the deployment's. So a job that walks every place does one place's share
 * per run, whatever the number of shards. Null when this deployment runs no such place.
 */
export function envOfOnePlace<E extends Env>(env: E, label: number): E | null {
  const all = placementOf(env);
  const at = all.each().find((place) => place.shard === label);
  if (!at) return null;
  const narrowed = { ...env };
  placements.set(narrowed, { ...all, each: () => [at] });
  return narrowed;
}

/** The place of shard `shard` (src/ledger only: everyone else asks the placement). */
export function placeAt(env: Env, shard: number): Place {
  // The sequencer's stub is made per commit: a stub belongs to the request that made it.
  return {
    db: dbOfShard(env, shard),
    commit: (plan) => ledgerOf(env, shard).commit(plan),
    isControl: shard === 0,
    shard,
  };
}
