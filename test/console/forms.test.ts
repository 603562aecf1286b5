import { describe, expect, it } from "vitest";
import { dollarsField, optionalDollars } from "../../src/console/ui/forms";

// The console's forms take dollars and the API keeps cents: the conversion is text to integer, never a float.
describe("dollars typed in a console form", () => {
  it("read as exact cents", () => {
    expect(optionalDollars("12")).toBe(1_200);
    expect(optionalDollars("12.5")).toBe(1_250);
    expect(optionalDollars("12.05")).toBe(1_205);
    expect(optionalDollars("0.07")).toBe(7);
    expect(optionalDollars("$1,250.00")).toBe(125_000);
    expect(optionalDollars("1000000000.01")).toBe(100_000_000_001);
    // 0.29 * 100 is 28.999999999999996 in floating point; the text reading has no such error.
    expect(optionalDollars("0.29")).toBe(29);
    expect(optionalDollars("")).toBeNull();
  });

  it("refuse what is not an amount of at most two decimals", () => {
    for (const text of ["12.345", "-1", "1e3", "12.", ".5", "1,25", "12,34.00", "abc", "1 000", "9999999999999"])
      expect(optionalDollars(text), text).toBeNaN();
  });

  it("show stored cents as the dollars that read back to them", () => {
    for (const cents of [0, 7, 29, 1_205, 125_000, 100_000_000_001])
      expect(optionalDollars(dollarsField(cents))).toBe(cents);
    expect(dollarsField(1_250)).toBe("12.50");
    expect(dollarsField(null)).toBe("");
  });
});
