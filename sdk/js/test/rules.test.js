// sluiced's request rules and credentials through the SDK: rules read by
// every role and written by the admin (the app's role refused 403),
// replaced where they stand and whole; credentials set, rotated (the
// placeholder kept), listed and deleted with their value in no answer; a
// token bound to a tenant reaches only its tenant's; sluiced's refusals
// come back as the error classes with its status and code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as S from '../src/index.js';
import { skip, BROKER, BROKER_URL, CA, TOKENS, uid } from './helpers.js';

const admin = () => new S.BrokerClient(BROKER_URL, { token: TOKENS.broker_admin, ca: CA });
const acme = () => new S.BrokerClient(BROKER_URL, { token: TOKENS.broker_acme, ca: CA });

async function refused(p, cls, status, code) {
  let err = null;
  try { await p; } catch (e) { err = e; }
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${err}`);
  assert.ok(err instanceof S.SluiceError);
  assert.deepEqual([err.status, err.code], [status, code], String(err));
  return err;
}

test('rules: add, list, get, replace where it stands and whole, delete; errors', { skip }, async () => {
  const a = admin();
  const app = new S.BrokerClient(BROKER);
  const [n1, n2, n3] = [uid('r1'), uid('r2'), uid('r3')];
  try {
    const r1 = await a.rules.add({ name: n1, hosts: ['insp.test'], action: 'deny', tenant: 'acme',
      methods: ['PUT'], paths: ['/pub/*'] });
    assert.deepEqual(r1, { name: n1, tenant: 'acme', hosts: ['insp.test'], methods: ['PUT'],
      paths: ['/pub/*'], action: 'deny' });
    const r2 = await a.rules.add({ name: n2, hosts: '*.insp.test:443', action: 'prompt' });
    assert.deepEqual([r2.tenant, r2.hosts, r2.methods, r2.paths], [null, ['*.insp.test:443'], [], []]);
    await a.rules.add({ name: n3, hosts: ['insp.test'], action: 'allow', methods: ['GET'] });

    const l = await app.rules.list();           // the app reads them
    assert.deepEqual(l.rules.map((r) => r.name), [n1, n2, n3]);
    assert.deepEqual(l.rules[0], r1);
    assert.deepEqual(l.config, []);
    assert.ok(l.builtin.length > 0 && l.builtin.every((b) => typeof b === 'string'));
    assert.deepEqual(await app.rules.get(n2), r2);

    const r1b = await a.rules.add({ name: n1, hosts: ['insp.test'], action: 'allow', tenant: 'acme' });
    assert.deepEqual([r1b.action, r1b.methods], ['allow', []]);
    assert.deepEqual((await a.rules.list()).rules.map((r) => r.name), [n1, n2, n3]);

    // writes are the admin's
    const f = await refused(app.rules.add({ name: uid('r'), hosts: ['insp.test'], action: 'deny' }),
      S.ForbiddenError, 403, 'forbidden');
    assert.ok(f.message);
    await refused(app.rules.delete(n1), S.ForbiddenError, 403, 'forbidden');
    await refused(app.rules.replace([]), S.ForbiddenError, 403, 'forbidden');

    let e = await refused(a.rules.add({ name: uid('r'), hosts: ['never.test'], action: 'deny' }),
      S.BadRequestError, 400, 'host_not_inspected');
    assert.match(e.message, /never\.test/);
    e = await refused(a.rules.add({ name: uid('r'), hosts: ['insp.test'], action: 'maybe' }),
      S.BadRequestError, 400, 'bad_request');
    assert.match(e.message, /action/);
    e = await refused(a.rules.replace([{ name: n1, hosts: ['insp.test'], action: 'deny' },
      { name: n1, hosts: ['insp.test'], action: 'allow' }]), S.ConflictError, 409, 'conflict');
    assert.match(e.message, /rules\[1\]/);
    assert.deepEqual((await a.rules.list()).rules.map((r) => r.name), [n1, n2, n3]);
    await refused(a.rules.get('no-such'), S.NotFoundError, 404, 'not_found');
    assert.throws(() => a.rules.replace(r1), S.InvalidArgumentError);

    const w = await a.rules.replace([{ name: n3, hosts: ['insp.test'], action: 'allow' },
      { name: n1, hosts: ['insp.test'], action: 'deny', tenant: 'beta' }]);
    assert.deepEqual(w.rules.map((r) => [r.name, r.tenant]), [[n3, null], [n1, 'beta']]);
    // bound to acme: those for every tenant and its own
    assert.deepEqual((await acme().rules.list()).rules.map((r) => r.name), [n3]);
    await refused(acme().rules.get(n1), S.NotFoundError, 404, 'not_found');

    await a.rules.delete(n3);
    await refused(a.rules.get(n3), S.NotFoundError, 404, 'not_found');
    await refused(a.rules.delete(n3), S.NotFoundError, 404, 'not_found');
  } finally {
    await a.rules.replace([]);
  }
  assert.deepEqual((await a.rules.list()).rules, []);
});

test('credentials: set, rotate, list, get, delete; never the value; tenant-bound tokens', { skip }, async () => {
  const a = admin();
  const app = new S.BrokerClient(BROKER);
  const name = uid('npm');
  const other = uid('beta');
  const value = `npm_${randomBytes(12).toString('hex')}`;
  const value2 = `npm_${randomBytes(12).toString('hex')}`;
  try {
    const c = await app.credentials.set({ name, tenant: 'acme', hosts: ['insp.test'], value,
      format: 'Bearer {}', methods: ['GET'], paths: ['/ok/*'] });
    assert.deepEqual([c.name, c.tenant, c.hosts, c.header, c.format, c.methods, c.paths],
      [name, 'acme', ['insp.test'], 'Authorization', 'Bearer {}', ['GET'], ['/ok/*']]);
    assert.ok(c.placeholder.startsWith(`sluice-cred:${name}:`));
    assert.ok(Number.isInteger(c.updated) && c.updated > 0);
    assert.ok(!JSON.stringify(c).includes(value) && !('value' in c.raw));
    const l = await app.credentials.list();
    assert.deepEqual(l.filter((x) => x.name === name), [c]);
    assert.ok(!JSON.stringify(l).includes(value));
    assert.deepEqual(await a.credentials.get(name), c);

    const c2 = await a.credentials.set({ name, tenant: 'acme', hosts: 'insp.test', value: value2, header: 'X-Token' });
    assert.equal(c2.placeholder, c.placeholder);
    assert.deepEqual([c2.header, c2.format, c2.methods, c2.paths], ['X-Token', '{}', [], []]);
    assert.ok(!JSON.stringify(c2).includes(value2));

    let e = await refused(app.credentials.set({ name: uid('c'), tenant: 'acme', hosts: ['never.test'], value }),
      S.BadRequestError, 400, 'bad_request');
    assert.match(e.message, /not inspected/);
    e = await refused(app.credentials.set({ name: uid('c'), tenant: 'acme', hosts: ['insp.test'], value,
      header: 'Bad Header' }), S.BadRequestError, 400, 'bad_request');
    assert.match(e.message, /inject\.header/);
    assert.ok(!String(e).includes(value) && !JSON.stringify(e.details).includes(value));
    await refused(app.credentials.get('no-such'), S.NotFoundError, 404, 'not_found');
    assert.throws(() => app.credentials.set({ name: uid('c'), tenant: 'acme', hosts: ['insp.test'] }),
      S.InvalidArgumentError);

    const b = acme();
    assert.deepEqual((await b.credentials.list()).filter((x) => x.name === name).map((x) => x.name), [name]);
    await a.credentials.set({ name: other, tenant: 'beta', hosts: ['insp.test'], value });
    assert.ok(!(await b.credentials.list()).some((x) => x.name === other));
    await refused(b.credentials.get(other), S.NotFoundError, 404, 'not_found');
    await refused(b.credentials.delete(other), S.NotFoundError, 404, 'not_found');
    await refused(b.credentials.set({ name: uid('c'), tenant: 'beta', hosts: ['insp.test'], value }),
      S.ForbiddenError, 403, 'forbidden');
    await refused(b.credentials.set({ name: other, tenant: 'acme', hosts: ['insp.test'], value }),
      S.ConflictError, 409, 'conflict');
    assert.equal((await a.credentials.get(other)).tenant, 'beta');

    await b.credentials.delete(name);
    await refused(app.credentials.get(name), S.NotFoundError, 404, 'not_found');
    await refused(app.credentials.delete(name), S.NotFoundError, 404, 'not_found');
  } finally {
    for (const n of [name, other]) {
      try { await a.credentials.delete(n); } catch (e) { if (!(e instanceof S.NotFoundError)) throw e; }
    }
  }
  assert.ok(!(await a.credentials.list()).some((x) => [name, other].includes(x.name)));
});
