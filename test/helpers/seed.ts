import { inject } from "vitest";

/**
 * This run's seed for the tests that draw random inputs (fast-check): new for each run, or
 * TEST_SEED's value to replay one (vitest.config.ts). Each failure names it.
 */
export const SEED = inject("seed");

/** What a failure says, so the run can be replayed. */
export const SEED_NOTE = `seed ${SEED}: replay with TEST_SEED=${SEED}`;
