import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../src/index.js';
import { skip, EXEC, EXEC_URL, BROKER, CA, TOKENS, uid, client, maker } from './helpers.js';

const make = maker();
after(() => make.cleanup());

test('seed flow: create, exec, write, read, list, destroy', { skip }, async () => {
  const c = client();
  const sb = await c.sandboxes.create({ tenantId: 'acme', userId: uid('alice') });
  try {
    const r = await sb.exec(['python3', '-c', 'print(6 * 7)']);
    assert.equal(r.stdout, '42\n');
    assert.equal(r.exitCode, 0);
    assert.ok(r.ok);
    assert.equal(await sb.write('data.txt', 'some content'), 12);
    assert.equal((await sb.read('data.txt')).toString(), 'some content');
    assert.deepEqual((await sb.list({ glob: '*.txt' })).map((e) => e.path), ['data.txt']);
  } finally {
    await sb.destroy();
  }
  await assert.rejects(sb.exec(['true']), (e) => e instanceof S.SandboxNotFoundError && e.status === 404 && e.code === 'not_found');
  await assert.rejects(c.sandboxes.get(sb.id), S.SandboxNotFoundError);
});

test('create options, get, list, setNetwork', { skip }, async () => {
  const c = make.client;
  const user = uid('bob');
  const sb = await make({ userId: user, id: uid('sb'), network: 'public', limits: { memoryMb: 256, timeoutS: 30 } });
  const i = sb.lastInfo;
  assert.deepEqual([i.tenant, i.user, i.state, i.tier, i.backend], ['acme', user, 'running', 'public', 'ns']);
  assert.deepEqual([i.limits.memoryMb, i.limits.timeoutS], [256, 30]);
  assert.equal((await c.broker.sessions.get(sb.session)).tier, 'public');
  const other = await make({ tenantId: 'globex', userId: user });
  assert.deepEqual(new Set((await c.sandboxes.list({ user })).map((s) => s.id)), new Set([sb.id, other.id]));
  assert.deepEqual((await c.sandboxes.list({ tenant: 'globex', user })).map((s) => s.id), [other.id]);
  assert.equal((await c.sandboxes.get(sb.id)).id, sb.id);
  assert.equal((await sb.setNetwork('off')).tier, 'off');
  assert.equal((await c.broker.sessions.get(sb.session)).tier, 'off');
  assert.match((await make()).id, /^sbx-[0-9a-f]{12}$/);
});

test('create errors: exists, limits above max, quota', { skip }, async () => {
  const c = make.client;
  const sb = await make();
  await assert.rejects(c.sandboxes.create({ tenantId: 'acme', userId: 'x', id: sb.id }),
    (e) => e instanceof S.ConflictError && e.code === 'exists' && e.status === 409);
  await assert.rejects(c.sandboxes.create({ tenantId: 'acme', userId: 'x', limits: { memoryMb: 99999 } }),
    (e) => e instanceof S.BadRequestError && e.field === 'memory_mb' && e.max === 4096);
  await assert.rejects(c.sandboxes.create({ tenantId: 'acme', userId: 'x', id: '../etc' }), TypeError);
  const user = uid('q');
  for (let i = 0; i < 3; i++) await make({ userId: user });
  await assert.rejects(c.sandboxes.create({ tenantId: 'acme', userId: user }), (e) =>
    e instanceof S.QuotaExceededError && e instanceof S.SluiceError && e.scope === 'user' && e.limit === 3 && e.inUse === 3 && e.status === 429);
});

test('health, doctor, unreachable, addresses', { skip }, async () => {
  const c = client();
  const h = await c.health();
  assert.equal(h.broker.ok, true);
  assert.ok(h.backends.some((b) => b.name === 'ns' && b.ok));
  const d = await c.doctor();
  assert.ok(d.ok, d.problems.join('; '));
  const bad = await new S.SandboxClient(`${EXEC}.nothing`).doctor();
  assert.ok(!bad.ok && /does not answer/.test(bad.problems[0]));
  await assert.rejects(new S.SandboxClient('/nonexistent/exec.sock').sandboxes.list(),
    (e) => e instanceof S.SluiceConnectionError && e.status === null && e.code === 'connection_failed');
  await assert.rejects(new S.BrokerClient(`${BROKER}.nothing`).health(), S.SluiceConnectionError);
  assert.throws(() => new S.SandboxClient('http://127.0.0.1:1'), TypeError);
  assert.throws(() => new S.SandboxClient(EXEC, { token: 'a-token-on-a-socket' }), TypeError);
  assert.equal(new S.SandboxClient(`unix:${EXEC}`).address, EXEC);
});

test('TLS with tokens: a tenant-bound token, 401, certificate checked', { skip }, async () => {
  const acme = new S.SandboxClient(EXEC_URL, { token: TOKENS.exec_acme, ca: CA });
  const mine = await acme.sandboxes.create({ tenantId: 'acme', userId: uid('t') });
  try {
    assert.equal((await mine.exec(['echo', 'tls'])).stdout, 'tls\n');
    const other = await make({ tenantId: 'globex' });
    // another tenant's sandbox answers as a missing one
    await assert.rejects(acme.sandboxes.get(other.id), S.SandboxNotFoundError);
    await assert.rejects(acme.sandboxes.create({ tenantId: 'globex', userId: 'x' }), S.ForbiddenError);
    const ids = (await acme.sandboxes.list()).map((s) => s.id);
    assert.ok(ids.includes(mine.id) && !ids.includes(other.id));
  } finally {
    await mine.destroy();
  }
  await assert.rejects(new S.SandboxClient(EXEC_URL, { token: 'no-such-token-0123456789', ca: CA }).health(),
    (e) => e instanceof S.UnauthorizedError && e.status === 401);
  await assert.rejects(new S.SandboxClient(EXEC_URL, { token: TOKENS.exec_app }).health(),
    (e) => e instanceof S.SluiceConnectionError && /certificate/i.test(e.message));
});
