// Dropped connections: a watch resumes with Last-Event-ID; reads are
// retried once, a create or a command never.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as S from '../src/index.js';
import { skip, EXEC, BROKER, ENV, WEB, uid, maker, take, waitFor, nonEmpty } from './helpers.js';

const make = maker();
after(() => make.cleanup());

/** A Unix socket in front of a daemon's: pause() cuts what is open and
 * refuses new connections; dropRequest/dropAnswer cut the next ones. */
function forwarder(target) {
  const f = { path: join(ENV.SLUICE_TEST_TMP, `fwd-${uid('f')}.sock`), heads: [], paused: false,
    dropRequest: 0, dropAnswer: 0, open: new Set() };
  f.server = net.createServer((c) => {
    if (f.paused) { c.destroy(); return; }
    const up = net.connect(target);
    f.open.add(c); f.open.add(up);
    const dropReq = f.dropRequest > 0 && f.dropRequest-- > 0;
    const dropAns = !dropReq && f.dropAnswer > 0 && f.dropAnswer-- > 0;
    let head = Buffer.alloc(0);
    let sent = false;
    const kill = () => { c.destroy(); up.destroy(); f.open.delete(c); f.open.delete(up); };
    c.on('data', (d) => {
      if (sent) { up.write(d); return; }
      head = Buffer.concat([head, d]);
      const i = head.indexOf('\r\n\r\n');
      if (i < 0) return;
      f.heads.push(head.subarray(0, i).toString('latin1'));
      if (dropReq) { kill(); return; }
      sent = true;
      up.write(head);
    });
    let ans = Buffer.alloc(0);
    up.on('data', (d) => {
      if (dropAns) {
        ans = Buffer.concat([ans, d]);
        if (ans.includes('\r\n\r\n')) kill();
        return;
      }
      c.write(d);
    });
    c.on('end', () => up.end());
    up.on('end', () => c.end());
    c.on('error', kill); up.on('error', kill);
    c.on('close', kill); up.on('close', kill);
  });
  f.listen = () => new Promise((r) => f.server.listen(f.path, r));
  f.pause = () => { f.paused = true; for (const s of f.open) s.destroy(); f.open.clear(); };
  f.resume = () => { f.paused = false; };
  f.close = () => { f.pause(); return new Promise((r) => f.server.close(r)); };
  return f;
}

test('a watch comes back with Last-Event-ID and gets the prompt it missed', { skip }, async () => {
  const f = forwarder(BROKER);
  await f.listen();
  const b = new S.BrokerClient(f.path);
  const direct = new S.BrokerClient(BROKER);
  const sb = await make({ network: 'registries' });
  const w = b.prompts.watch({ session: sb.session, pending: false });
  try {
    const first = w.next();
    await waitFor(() => f.heads.some((h) => h.startsWith('GET /v1/events')), 10000, 'the watch');
    const c1 = await sb.start(['curl', '-sS', '--max-time', '60', `${WEB}one`]);
    const p1 = (await first).value;
    assert.equal(p1.path, '/one');
    await p1.allowOnce();
    await c1.wait({ timeoutMs: 60000 });
    const seen = w.events.lastEventId;
    assert.ok(seen != null);
    f.pause();
    const c2 = await sb.start(['curl', '-sS', '--max-time', '60', `${WEB}two`]);
    const pid = (await waitFor(async () => nonEmpty((await direct.prompts.list()).filter((p) => p.session === sb.session)),
      20000, 'the prompt while the watch is away'))[0].id;
    const n = f.heads.length;
    f.resume();
    const p2 = await take(w);
    assert.equal(p2.id, pid);
    const resumed = f.heads.slice(n).filter((h) => h.startsWith('GET /v1/events'));
    assert.ok(resumed.length && resumed[0].includes(`Last-Event-ID: ${seen}`), resumed.join('|'));
    assert.ok(w.events.connects >= 2);
    await p2.allowOnce();
    await c2.wait({ timeoutMs: 60000 });
    assert.equal((await c2.output({ offset: 0 })).stdout.data, 'hello from web.test\n');
  } finally {
    w.close();
    await f.close();
  }
});

test('reads retried once; create and exec never', { skip }, async () => {
  const f = forwarder(EXEC);
  await f.listen();
  try {
    const c = new S.SandboxClient(f.path);
    const sb0 = await make();
    f.dropRequest = 1;
    assert.ok((await c.sandboxes.list()).some((s) => s.id === sb0.id));
    assert.equal(f.heads.length, 2);
    f.heads.length = 0;
    f.dropAnswer = 1;
    assert.equal((await c.sandboxes.get(sb0.id)).id, sb0.id);
    assert.equal(f.heads.length, 2);
    f.heads.length = 0;
    f.dropRequest = 2;
    await assert.rejects(c.sandboxes.get(sb0.id), S.SluiceConnectionError);
    assert.equal(f.heads.length, 2);
    const user = uid('once');
    f.heads.length = 0;
    f.dropAnswer = 1;
    await assert.rejects(c.sandboxes.create({ tenantId: 'acme', userId: user }),
      (e) => e instanceof S.SluiceConnectionError && e.status === null);
    assert.equal(f.heads.length, 1);
    const made = await make.client.sandboxes.list({ user });
    assert.equal(made.length, 1);
    make.ids.push(made[0].id);
    const viaFwd = await c.sandboxes.get(made[0].id);
    f.heads.length = 0;
    f.dropAnswer = 1;
    await assert.rejects(viaFwd.exec('echo x >> once.txt'), S.SluiceConnectionError);
    assert.equal(f.heads.length, 1);
    assert.equal(await made[0].readText('once.txt'), 'x\n');
  } finally {
    await f.close();
  }
});

test('npm pack ships the sources and the declarations', { skip }, () => {
  const dir = join(dirname(fileURLToPath(import.meta.url)), '..');
  let out;
  try {
    out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_cache: join(ENV.SLUICE_TEST_TMP, '.npm'),
        npm_config_update_notifier: 'false', npm_config_offline: 'true' } });
  } catch (e) {
    if (e.code === 'ENOENT') assert.fail('npm is not installed (it comes with Node; Debian: apt-get install npm)');
    throw e;
  }
  const [info] = JSON.parse(out);
  const files = info.files.map((x) => x.path).sort();
  assert.equal(info.name, 'sluice');
  assert.equal(info.version, '0.1.0');
  for (const p of ['index.d.ts', 'webhook.d.ts', 'package.json', 'README.md', 'src/index.js', 'src/client.js',
    'src/broker.js', 'src/http.js', 'src/errors.js', 'src/models.js', 'src/webhook.js', 'src/pty.js']) {
    assert.ok(files.includes(p), `${p} in ${files.join(' ')}`);
  }
  assert.ok(!files.some((p) => p.startsWith('test/')));
});
