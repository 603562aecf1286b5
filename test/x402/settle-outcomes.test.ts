import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { setFaultHook } from "../../src/lib/faults";
import { builtInFacilitator, type Facilitator } from "../../src/x402/facilitator";
import { cleanUp, expectCreditedOnce, setUp, x } from "../helpers/settle-outcomes";
import { submitAuthorization } from "../helpers/x402";

/*
 * A settlement reported failed, or credited with an error, after the money
 * may have moved (x402-interop #6, reliability-anchors #24 and #26): the
 * service keeps the charge claimed, answers pending, and reconciliation
 * decides from the chain, crediting the transaction that actually used the
 * authorization exactly once. These go through the service's own settler (the
 * built-in facilitator), so they run batched too (the workers-batch project);
 * test/x402/facilitator-outcomes.test.ts has what a facilitator reports.
 */

afterEach(cleanUp);

describe("a settlement reported failed after the money moved", () => {
  it("someone else submits the authorization before our settler: our transaction reverts, theirs paid us, and theirs is credited", async () => {
    const s = await setUp();
    const inner = builtInFacilitator(env, x());
    let theirs = "";
    const frontRunning: Facilitator = {
      verify: (payment, terms) => inner.verify(payment, terms),
      async settle(payment, terms) {
        theirs = (await submitAuthorization(s.payment.payload)).transactionHash;
        return inner.settle(payment, terms);
      },
    };
    const outcome = await s.pay(frontRunning);
    expect(outcome.kind).toBe("pending");
    expect((await s.state()).payment).toMatchObject({
      status: "unknown",
      error: "transaction_reverted; authorization used on chain",
    });
    await expectCreditedOnce(s, theirs);
  });

  it("the ledger fails to credit a settled transfer: pending, not an error, and reconciliation credits it", async () => {
    const s = await setUp();
    setFaultHook((point) => {
      if (point === "ledger.before_batch") throw new Error("injected: ledger unavailable");
    });
    const outcome = await s.pay(builtInFacilitator(env, x()));
    setFaultHook(null);
    expect(outcome.kind).toBe("pending");
    const { payment } = await s.state();
    expect(payment).toMatchObject({ status: "unknown", error: "credit_failed" });
    expect(payment!.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    await expectCreditedOnce(s, payment!.txHash!);
  });
});
