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

test('no network given: the daemon default tier (off)', { skip }, async () => {
  const c = make.client;
  const sb = await make();
  assert.equal(sb.lastInfo.tier, 'off');
  assert.equal((await sb.info()).tier, 'off');
  assert.equal((await c.broker.sessions.get(sb.session)).tier, 'off');
  assert.equal((await make({ network: 'registries' })).lastInfo.tier, 'registries');
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
  assert.deepEqual(await c.healthz(), { ok: true, imageReady: true });
  const h = await c.health();
  assert.equal(h.broker.ok, true);
  assert.ok(h.backends.some((b) => b.name === 'ns' && b.ok));
  const d = await c.doctor();
  assert.ok(d.ok, d.problems.join('; '));
  const n = await c.node();
  assert.equal(n.draining, false);
  assert.ok(n.capacity.cpus >= 1 && n.host);
  // a drain is the admin's: an app is refused
  await assert.rejects(c.setDraining(true), (e) => e instanceof S.ForbiddenError && e.status === 403);
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

test('discardArchive: Clear of a sandbox that is gone, by id', { skip }, async () => {
  const c = make.client;
  const user = uid('clr');
  const sb = await c.sandboxes.create({ tenantId: 'acme', userId: user, id: uid('clr') });
  await sb.write('keep.txt', 'x');
  await sb.destroy(); // archived: only the archive is left
  assert.deepEqual(await c.sandboxes.discardArchive(sb.id), { id: sb.id, deleted: false, archive: 'discarded' });
  await assert.rejects(c.sandboxes.discardArchive(sb.id), S.SandboxNotFoundError);
  const again = await c.sandboxes.create({ tenantId: 'acme', userId: user, id: sb.id });
  try {
    assert.ok(!(await again.exec('ls -A /workspace')).stdout.includes('keep.txt'));
  } finally {
    await again.destroy({ archive: false });
  }
});

// a ustar of (name, type '0' file | '5' dir | '2' symlink, data or target)
function ustar(entries) {
  const blocks = [];
  for (const [name, type, v] of entries) {
    const h = Buffer.alloc(512);
    const data = type === '0' ? Buffer.from(v) : Buffer.alloc(0);
    h.write(name, 0);
    h.write(type === '5' ? '0000755\0' : '0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('14500000000\0', 136);
    h.write('        ', 148);
    h.write(type, 156);
    if (type === '2') h.write(v, 157);
    h.write('ustar\0' + '00', 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

function untarNames(buf) {
  const out = {};
  for (let off = 0; off + 512 <= buf.length;) {
    const h = buf.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    let name = h.subarray(0, 100).toString().replace(/\0.*$/s, '');
    const size = parseInt(h.subarray(124, 136).toString().replace(/\0.*$/s, '').trim() || '0', 8);
    const type = String.fromCharCode(h[156]);
    off += 512;
    if (type === 'x' || type === 'g') {   // pax: the path record
      const m = /\d+ path=([^\n]*)\n/.exec(buf.subarray(off, off + size).toString());
      off += Math.ceil(size / 512) * 512;
      const h2 = buf.subarray(off, off + 512);
      const size2 = parseInt(h2.subarray(124, 136).toString().replace(/\0.*$/s, '').trim() || '0', 8);
      name = m ? m[1] : h2.subarray(0, 100).toString().replace(/\0.*$/s, '');
      out[name.replace(/\/$/, '')] = { type: String.fromCharCode(h2[156]), data: buf.subarray(off + 512, off + 512 + size2), link: h2.subarray(157, 257).toString().replace(/\0.*$/s, '') };
      off += 512 + Math.ceil(size2 / 512) * 512;
      continue;
    }
    out[name.replace(/\/$/, '')] = { type, data: buf.subarray(off, off + size), link: h.subarray(157, 257).toString().replace(/\0.*$/s, '') };
    off += Math.ceil(size / 512) * 512;
  }
  return out;
}

test('putTar / getTar: a tree in one call and back; a hostile entry refused, nothing written', { skip }, async () => {
  const sb = await make({ userId: uid('tar') });
  const big = Buffer.alloc(300000, 7);
  const r = await sb.putTar(ustar([['d/', '5'], ['d/a.txt', '0', 'alpha'], ['d/big.bin', '0', big],
    ['d/empty/', '5'], ['d/link', '2', 'a.txt']]), { dir: 'up' });
  assert.deepEqual(r, { path: 'up', files: 2, dirs: 2, links: 1, bytes: 300005 });
  assert.equal((await sb.read('up/d/a.txt')).toString(), 'alpha');
  const got = untarNames(await sb.getTar({ dir: 'up' }));
  assert.ok(got['d/empty'] && got['d/empty'].type === '5', JSON.stringify(Object.keys(got)));
  assert.equal(got['d/link'].type, '2');
  assert.equal(got['d/link'].link, 'a.txt');
  assert.ok(got['d/big.bin'].data.equals(big));
  await assert.rejects(sb.putTar(ustar([['ok.txt', '0', 'x'], ['l', '2', '/etc'], ['l/passwd', '0', 'y']]), { dir: 'h' }),
    (e) => e instanceof S.BadRequestError && e.status === 400 && /l\/passwd/.test(e.message));
  await assert.rejects(sb.read('h/ok.txt'), S.NotFoundError);
  await assert.rejects(sb.getTar({ dir: 'nosuch' }), S.NotFoundError);
  assert.throws(() => sb.getTar({ dir: 5 }), S.InvalidArgumentError);
  await assert.rejects(sb.putTar(42), S.InvalidArgumentError);
});
