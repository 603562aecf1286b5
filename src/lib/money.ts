import { z } from "zod";

/** Largest amount accepted anywhere: 2^53-1 keeps cents exact; this is far below it. */
export const MAX_AMOUNT_MINOR = 100_000_000_000; // one billion dollars in cents

/** A positive integer amount of USD cents. */
export const amountMinor = z.number().int().positive().max(MAX_AMOUNT_MINOR);

/** USDC has 6 decimals: one cent is 10,000 base units. */
export const USDC_UNITS_PER_CENT = 10_000n;
export const centsToUsdcUnits = (cents: number): bigint => BigInt(cents) * USDC_UNITS_PER_CENT;
