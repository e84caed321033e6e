/// <reference types="node" />
type Bytes = string | Buffer | Uint8Array;
export const DEFAULT_TOLERANCE_S: number;
/** The X-Sluice-Signature value sluiced would send. */
export function sign(secret: Bytes, timestamp: string | number, body: Bytes): string;
/** True when signature is the HMAC-SHA256 of "<timestamp>.<body>" with
 * secret (constant-time compare) and timestamp is within toleranceS of now. */
export function verify(secret: Bytes, timestamp: string | number | null | undefined, body: Bytes,
  signature: string | null | undefined,
  options?: { toleranceS?: number | null; now?: number | null }): boolean;
