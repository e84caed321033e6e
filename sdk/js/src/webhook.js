// Checking the prompts sluiced(8) POSTs to a webhook: X-Sluice-Signature
// is "sha256=" + hex(HMAC-SHA256(secret, "<timestamp>.<body>")) over the
// raw body, X-Sluice-Timestamp the Unix seconds of the attempt.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const DEFAULT_TOLERANCE_S = 300;

function buf(v) {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : Buffer.from(v);
}

function secretOf(s) {
  // sluiced keeps the secret file's bytes less trailing line ends
  let b = buf(s);
  let n = b.length;
  while (n > 0 && (b[n - 1] === 0x0a || b[n - 1] === 0x0d)) n--;
  return b.subarray(0, n);
}

/** The X-Sluice-Signature value sluiced would send. */
export function sign(secret, timestamp, body) {
  const h = createHmac('sha256', secretOf(secret));
  h.update(Buffer.from(String(timestamp) + '.', 'ascii'));
  h.update(buf(body));
  return 'sha256=' + h.digest('hex');
}

/**
 * True when signature is the HMAC-SHA256 of "<timestamp>.<body>" with
 * secret (compared in constant time) and timestamp is within toleranceS
 * seconds of now (null: any age).  body must be the raw bytes received.
 */
export function verify(secret, timestamp, body, signature,
  { toleranceS = DEFAULT_TOLERANCE_S, now = null } = {}) {
  if (timestamp == null || signature == null) return false;
  const ts = String(timestamp).trim();
  if (!/^[0-9]{1,12}$/.test(ts)) return false;
  if (toleranceS != null) {
    const t = now == null ? Date.now() / 1000 : now;
    if (Math.abs(t - Number(ts)) > toleranceS) return false;
  }
  const want = Buffer.from(sign(secret, ts, body), 'ascii');
  const got = Buffer.from(String(signature).trim(), 'utf8');
  if (got.length !== want.length) return false;
  return timingSafeEqual(want, got);
}
