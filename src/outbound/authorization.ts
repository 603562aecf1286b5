import { encodeFunctionData, type Hex, keccak256, parseSignature, stringToHex } from "viem";
import { EIP3009_ABI } from "../chain/client";
import type { X402Settings } from "../config/env";
import { type SqlStatement, sqlStatement } from "../db/statements";
import { hdPrivateKeyAt } from "../lib/hd";
import { type IdPlace, newId } from "../lib/ids";
import { centsToUsdcUnits } from "../lib/money";
import { signTransferAuthorization } from "../x402/outbound/authorization";
import { gasAccountOf } from "../x402/transfer";

/** What a transfer the service sends is for. */
export type OutboundPurpose = "payout" | "refund" | "sweep";

/**
 * How long an outbound authorization can be used. Until then a transfer whose outcome is unknown
 * waits for the chain; once it has expired unused, nothing can ever move it, and it fails for good.
 */
export const OUTBOUND_AUTHORIZATION_SECONDS = 3600;

/** One row of `outbound_transfers` (migrations/0011): the authorization and what became of it. */
export interface OutboundTransfer {
  id: string;
  purpose: OutboundPurpose;
  ownerId: string;
  /** The chain and token it was made for (lower case), whatever the deployment is configured with now. */
  network: string;
  asset: string;
  fromAddress: Hex;
  /** `settlement`, `deposit:<index>` or `receiving:<index>`: whose key signs. */
  signer: string;
  toAddress: Hex;
  /** Token base units, as a decimal string. */
  value: string;
  nonce: Hex;
  validBefore: number;
  status: "pending" | "confirmed" | "failed";
  broadcastAt: string | null;
  /** The chain's head when it was first handed over (null before, and on rows from before it was recorded). */
  sentBlock: number | null;
  txHash: Hex | null;
  updatedAt: string;
}

export const OUTBOUND_SELECT = `SELECT id, purpose, owner_id AS ownerId, network, asset, from_address AS fromAddress, signer,
  to_address AS toAddress, value, nonce, valid_before AS validBefore, status, broadcast_at AS broadcastAt,
  sent_block AS sentBlock, tx_hash AS txHash, updated_at AS updatedAt FROM outbound_transfers`;

/** True when a sweep of the deposit or payment `ownerId` (an SQL expression) was written. */
export const sweepWritten = (ownerId: string) =>
  `EXISTS (SELECT 1 FROM outbound_transfers o WHERE o.purpose = 'sweep' AND o.owner_id = ${ownerId})`;

/** True when an outbound transfer names the transaction `txHash` (an SQL expression, lowercase). */
export const outboundOfTransaction = (txHash: string) =>
  `EXISTS (SELECT 1 FROM outbound_transfers WHERE lower(tx_hash) = ${txHash})`;

/**
 * The nonce of the one authorization an owner ever gets, derived from it: two rows for one payout
 * (there cannot be two: the owner is unique) could still never both move money.
 */
export const outboundNonce = (purpose: OutboundPurpose, ownerId: string): Hex =>
  keccak256(stringToHex(`agent-pay:${purpose}:${ownerId}`));

/**
 * The statement that records a transfer to send, for the batch that makes it owed (a payout's
 * debit, a refund's): it exists exactly when the money left the ledger for the chain. `at`: the
 * place of that batch, where the row lives; its id carries it (`otx_s1_…`), so every later step
 * finds the row's database from the id alone.
 */
export function outboundInsert(
  x: X402Settings,
  t: {
    purpose: OutboundPurpose;
    ownerId: string;
    from: Hex;
    signer: string;
    to: Hex;
    value: bigint;
    createdAt: string;
    at: IdPlace;
  },
): { id: string; statement: SqlStatement } {
  const id = newId("outboundTransfer", t.at);
  const validBefore = Math.floor(Date.parse(t.createdAt) / 1000) + OUTBOUND_AUTHORIZATION_SECONDS;
  return {
    id,
    statement: sqlStatement(
      `INSERT INTO outbound_transfers (id, purpose, owner_id, network, asset, from_address, signer, to_address, value, nonce, valid_before, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
      id,
      t.purpose,
      t.ownerId,
      x.network,
      x.asset.toLowerCase(),
      t.from.toLowerCase(),
      t.signer,
      t.to.toLowerCase(),
      t.value.toString(),
      outboundNonce(t.purpose, t.ownerId),
      validBefore,
      t.createdAt,
      t.createdAt,
    ),
  };
}

/**
 * A transfer from the settlement address, signed by its key: a payout of `amountMinor` cents (payouts
 * are whole cents), or an x402 refund of exactly `amountBaseUnits` (a refund of a payment below a cent
 * is below a cent too).
 */
export const settlementTransfer = (
  x: X402Settings,
  t: { purpose: "payout" | "refund"; ownerId: string; to: Hex; createdAt: string; at: IdPlace } & (
    | { amountMinor: number }
    | { amountBaseUnits: bigint }
  ),
) =>
  outboundInsert(x, {
    at: t.at,
    purpose: t.purpose,
    ownerId: t.ownerId,
    from: x.payTo,
    signer: "settlement",
    to: t.to,
    value: "amountBaseUnits" in t ? t.amountBaseUnits : centsToUsdcUnits(t.amountMinor),
    createdAt: t.createdAt,
  });

/** Whether this deployment can send money out: the settlement key signs, a gas key sends. */
export const sendsOut = (x: X402Settings | null): x is X402Settings =>
  !!x?.settlementPrivateKey && x.facilitatorPrivateKeys.length > 0;

/** The private key behind `signer`, or null when this deployment does not hold it. */
export function signerKey(x: X402Settings, signer: string): Hex | null {
  if (signer === "settlement") return x.settlementPrivateKey;
  const [kind, index] = signer.split(":");
  const i = Number(index);
  if (!Number.isSafeInteger(i) || i < 0) return null;
  // The receiving key's accounts: 0 derives agents' deposit addresses, 1 charges' and links' receiving ones.
  if (kind === "deposit") return hdPrivateKeyAt(x.receivingMnemonic, 0, i);
  if (kind === "receiving") return hdPrivateKeyAt(x.receivingMnemonic, 1, i);
  return null;
}

/**
 * The `transferWithAuthorization` call that moves the row's value, signed by its sender's key
 * (valid from time 0 to its `validBefore`). Signing is deterministic (RFC 6979), so the call is the
 * same every time it is built: sending it again can only be the same transfer. Null when the key
 * is not held, or does not belong to the row's sender.
 */
export async function signedTransferCall(x: X402Settings, t: OutboundTransfer): Promise<Hex | null> {
  const key = signerKey(x, t.signer);
  if (!key) return null;
  const account = gasAccountOf(key);
  if (account.address.toLowerCase() !== t.fromAddress.toLowerCase()) return null;
  const message = {
    from: account.address,
    to: t.toAddress,
    value: BigInt(t.value),
    validAfter: 0n,
    validBefore: BigInt(t.validBefore),
    nonce: t.nonce,
  };
  const token = { asset: x.asset, domain: { name: x.assetName, version: x.assetVersion } };
  const signature = await signTransferAuthorization(account, token, x.chainId, message);
  const { r, s, v, yParity } = parseSignature(signature);
  return encodeFunctionData({
    abi: EIP3009_ABI,
    functionName: "transferWithAuthorization",
    args: [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      Number(v ?? BigInt((yParity ?? 0) + 27)),
      r,
      s,
    ],
  });
}
