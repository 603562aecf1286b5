// The receipt signing keys the tests' Worker has (vitest.config.ts binds the same): key 1 signs,
// key 0 stands for a key rotated out whose public half is still published.
export const TEST_RECEIPT_KEYS = [
  {
    kty: "OKP",
    crv: "Ed25519",
    x: "8YWRM_Mmsbcw4xkMgT26Q049VlS9TFRO_AG8Q1Km2dk",
    d: "fTViV_hSkvj84OCgZhLk5f84CHoIajcYuirQDIQdUi4",
    kid: "test-only-receipts-0",
  },
  {
    kty: "OKP",
    crv: "Ed25519",
    x: "Ct9RKXyyjB0UBb5jrLEk6TL8lOPq235ue2RPLqSjKQQ",
    d: "FD28-PXx39qgV7EWBXhIWtw1ilZs9ZAMgS3AqQC3yXw",
    kid: "test-only-receipts-1",
  },
] as const;

/** A key without a development kid, for settings that must pass as production. */
export const PRODUCTION_LIKE_RECEIPT_KEY = JSON.stringify({
  kty: "OKP",
  crv: "Ed25519",
  x: "OqoDAvRDtgVaumXPhCoY92ggy4m8SdQYR1VgyI2eBzM",
  d: "qNOeS-cxi-ZC6sAMTU_xBKDopTGIKHz2-7L8O8pSRvI",
});
