import { describe, expect, it } from "vitest";
import { usdOfBaseUnits as consoleUsd } from "../../src/console/ui/layout";
import { centsIfWhole, dollarsOfBaseUnits, wholeCentsOf } from "../../src/lib/money";
import { usdOfBaseUnits as toolUsd } from "../../src/mcp/paying";

describe("exact amounts as text", () => {
  it("states every place an amount needs, and at least two", () => {
    expect(dollarsOfBaseUnits(12_340_000n)).toBe("12.34");
    expect(dollarsOfBaseUnits(1_000_000n)).toBe("1.00");
    expect(dollarsOfBaseUnits(1_000n)).toBe("0.001");
    expect(dollarsOfBaseUnits(1n)).toBe("0.000001");
    expect(dollarsOfBaseUnits(-1n)).toBe("-0.000001");
    expect(dollarsOfBaseUnits(0n)).toBe("0.00");
    expect(dollarsOfBaseUnits(1_234_567_890_000n, { grouped: true })).toBe("1,234,567.89");
  });

  it("reads the same in the console and in an agent's tool answer", () => {
    expect(consoleUsd("1000")).toBe("$0.001");
    expect(consoleUsd(-25_000n)).toBe("-$0.025");
    expect(consoleUsd("1234500000")).toBe("$1,234.50");
    expect(toolUsd("1000")).toBe("0.001 USD");
    expect(toolUsd("1234500000", "USD")).toBe("1234.50 USD");
  });

  it("derives cents by truncation, and states them only when whole", () => {
    expect(wholeCentsOf(29_999n)).toBe(2);
    expect(centsIfWhole(30_000n)).toBe(3);
    expect(centsIfWhole(30_001n)).toBeNull();
  });
});
