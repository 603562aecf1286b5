import { z } from "zod";

/** Largest amount accepted anywhere: 2^53-1 keeps cents exact; this is far below it. */
export const MAX_AMOUNT_MINOR = 100_000_000_000; // one billion dollars in cents

/** A positive integer amount of USD cents. */
export const amountMinor = z.number().int().positive().max(MAX_AMOUNT_MINOR);

/** USDC has 6 decimals: one cent is 10,000 base units. */
export const USDC_UNITS_PER_CENT = 10_000n;
export const centsToUsdcUnits = (cents: number): bigint => BigInt(cents) * USDC_UNITS_PER_CENT;

/**
 * Money held or moved exactly is counted in the token's base units (bigint). The cents a column or
 * field states beside them are derived: whole cents, truncated toward zero (rounded down for a
 * balance, which is never negative).
 */
export const wholeCentsOf = (baseUnits: bigint): number => Number(baseUnits / USDC_UNITS_PER_CENT);

/** An amount in cents when it is a whole number of them; null when cents cannot state it exactly. */
export const centsIfWhole = (baseUnits: bigint): number | null =>
  baseUnits % USDC_UNITS_PER_CENT === 0n ? wholeCentsOf(baseUnits) : null;

/**
 * A base-unit amount as a D1 parameter: D1 binds numbers, so it must be a safe integer (every
 * single amount is: the largest accepted, MAX_AMOUNT_MINOR cents, is 10^15 base units).
 */
export function baseUnitsParam(baseUnits: bigint): number {
  const n = Number(baseUnits);
  if (!Number.isSafeInteger(n) || BigInt(n) !== baseUnits) throw new Error(`base units out of range: ${baseUnits}`);
  return n;
}

/**
 * The exact amount (decimal text) of something that states `amountMinor` and maybe `amountBaseUnits`
 * (an audit row, a receipt): its base units, or, when it has none (written before amounts below a
 * cent existed), its cents x 10,000.
 */
export function exactBaseUnitsOf(stated: { amountMinor: number | null; amountBaseUnits?: string | null }): string {
  if (stated.amountBaseUnits != null) return stated.amountBaseUnits;
  if (stated.amountMinor === null) throw new Error("no amount stated");
  return String(centsToUsdcUnits(stated.amountMinor));
}

/**
 * An exact amount of base units (6 decimals) as decimal dollars, with every place it needs and at
 * least two: "12.34", "0.001", "-0.000001"; `grouped` separates thousands ("1,234.50").
 */
export function dollarsOfBaseUnits(units: bigint, options: { grouped?: boolean } = {}): string {
  const abs = units < 0n ? -units : units;
  const whole = abs / 1_000_000n;
  const fraction = (abs % 1_000_000n)
    .toString()
    .padStart(6, "0")
    .replace(/0{1,4}$/, "");
  const wholeText = options.grouped ? whole.toLocaleString("en-US") : whole.toString();
  return `${units < 0n ? "-" : ""}${wholeText}.${fraction.padEnd(2, "0")}`;
}
