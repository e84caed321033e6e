// The world tests/scenario/t_sdk_js.py started, from SLUICE_TEST_*.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { SandboxClient, NotFoundError } from '../src/index.js';

const E = process.env;
export const ready = 'SLUICE_TEST_EXEC' in E;
export const skip = ready ? false
  : 'run through tests/scenario/t_sdk_js.py (make check TESTS=tests/scenario/t_sdk_js.py): it starts the daemons';
export const EXEC = E.SLUICE_TEST_EXEC;
export const BROKER = E.SLUICE_TEST_BROKER;
export const EXEC_URL = E.SLUICE_TEST_EXEC_URL;
export const BROKER_URL = E.SLUICE_TEST_BROKER_URL;
export const CA = ready ? readFileSync(E.SLUICE_TEST_CA) : null;
export const TOKENS = ready ? JSON.parse(readFileSync(E.SLUICE_TEST_TOKENS, 'utf8')) : {};
export const WEB = E.SLUICE_TEST_WEB;
export const WEB_PORT = ready ? Number(new URL(E.SLUICE_TEST_WEB).port) : 0;
export const INDEX = E.SLUICE_TEST_INDEX;
export const ENV = E;

export const uid = (p = 'js') => `${p}-${randomBytes(5).toString('hex')}`;
/** a for waitFor: an empty array is no answer */
export const nonEmpty = (a) => (a.length ? a : null);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(pred, timeoutMs = 20000, what = 'condition') {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await pred();
    if (v) return v;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export function client() { return new SandboxClient(EXEC, { broker: BROKER }); }

/** Sandboxes made by a test, destroyed by cleanup(). */
export function maker() {
  const c = client();
  const ids = [];
  const make = async (o = {}) => {
    const sb = await c.sandboxes.create({ tenantId: 'acme', userId: uid('u'), ...o });
    ids.push(sb.id);
    return sb;
  };
  make.client = c;
  make.ids = ids;
  make.cleanup = async () => {
    for (const id of ids) {
      try { await (await c.sandboxes.get(id)).destroy({ archive: false }); } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
    }
  };
  return make;
}

/** The first item of an async iterator, or a rejection after timeoutMs. */
export async function take(it, timeoutMs = 30000) {
  let t;
  const timer = new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`nothing came in ${timeoutMs} ms`)), timeoutMs); });
  try {
    const r = await Promise.race([it.next(), timer]);
    if (r.done) throw new Error('the iterator ended');
    return r.value;
  } finally {
    clearTimeout(t);
  }
}
