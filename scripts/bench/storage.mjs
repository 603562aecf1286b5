// Bytes of D1 per wallet payment (issue #27): a merchant with a webhook endpoint is paid a known
// number of times by one agent, each payment on a charge made for it, and the database's size
// (page count times page size) is read before and after. Deleted rows free pages but never shrink
// the file, so the steady state is measured over a second round that follows a retention run:
// what that round needs beyond the pages the first round's webhook history left free is what a
// payment keeps (until archiving) once retention is running. A third round followed by retention
// and archiving leaves what a payment keeps in D1 for good.
import { call, createAgent, createCharges, createMerchant, inParallel } from "./api.mjs";

/**
 * At most this many bytes of D1 per wallet payment in steady state: what a payment still holds once
 * retention and archiving have run (its charge, and the key a receipt finds an archived row by).
 */
export const BYTES_PER_PAYMENT_TARGET = 1024;

const PAY_CONCURRENCY = 16;

/**
 * @param {{ B: string, consoleKey: string, receiver: { url: string, setSecret: (s: string) => void },
 *   quiet: () => Promise<void>, log: (line: string) => void, payments: number }} options
 */
export async function measureStorage({ B, consoleKey, receiver, quiet, log, payments }) {
  const merchant = await createMerchant(B, consoleKey, "bench storage");
  const agent = await createAgent(B, consoleKey, "bench storage agent", payments * 2 * 100);
  const endpoint = await call(B, "POST", "/settings/webhooks", {
    token: consoleKey,
    body: { url: receiver.url, merchantId: merchant.merchantId },
  });
  receiver.setSecret(endpoint.secret);
  const size = async () => (await call(B, "GET", "/__bench/storage")).bytes;
  /** Charges made and paid, every event delivered. */
  const round = async () => {
    const charges = await createCharges(B, merchant.apiKey, payments, PAY_CONCURRENCY);
    await inParallel(charges, PAY_CONCURRENCY, (chargeId) =>
      call(B, "POST", `/charges/${chargeId}/pay`, { token: agent.apiKey }),
    );
    await quiet();
  };
  const retention = () => call(B, "POST", "/__bench/retention");

  log(`storage: ${payments} wallet payments, each to a charge of its own, events delivered to one endpoint ...`);
  await quiet();
  const start = await size();
  await round();
  const written = (await size()) - start;
  const firstRetention = await retention();
  // Whether or not the file shrank, what the second round adds over a retention run is what it keeps.
  const afterRetention = await size();
  await round();
  await retention();
  const kept = (await size()) - afterRetention;
  await call(B, "POST", "/__bench/archive");
  const afterArchive = await size();
  await round();
  await retention();
  await call(B, "POST", "/__bench/archive");
  const forGood = (await size()) - afterArchive;
  const result = {
    payments,
    asWrittenBytesPerPayment: Math.round(written / payments),
    steadyBytesPerPayment: Math.round(kept / payments),
    archivedBytesPerPayment: Math.round(forGood / payments),
    retentionDeleted: firstRetention.deleted,
    target: BYTES_PER_PAYMENT_TARGET,
  };
  result.met = result.archivedBytesPerPayment <= BYTES_PER_PAYMENT_TARGET;
  log(
    `  ${result.asWrittenBytesPerPayment} bytes of D1 per payment as written (charge, ledger, audit, webhook history); ` +
      `${result.steadyBytesPerPayment} once retention runs, ` +
      `${result.archivedBytesPerPayment} once its ledger and audit rows are archived too (target <= ${BYTES_PER_PAYMENT_TARGET})`,
  );
  return result;
}
