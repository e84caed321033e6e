import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../src/index.js';
import { skip, INDEX, maker, waitFor, BROKER_URL, TOKENS, CA } from './helpers.js';

const make = maker();
let sb;
before(async () => { if (!skip) sb = await make({ network: 'registries' }); });
after(() => make.cleanup());

test('exec: exit code, output, env, cwd, stdin, signal', { skip }, async () => {
  let r = await sb.exec(['sh', '-c', 'echo out; echo err >&2; exit 3']);
  assert.deepEqual([r.exitCode, r.signal, r.stdout, r.stderr, r.ok], [3, null, 'out\n', 'err\n', false]);
  await sb.exec('mkdir -p sub');
  r = await sb.exec('cat; echo $FOO; pwd', { env: { FOO: 'bar' }, cwd: 'sub', stdin: 'in put\n' });
  assert.equal(r.stdout, 'in put\nbar\n/workspace/sub\n');
  assert.equal((await sb.exec(['cat'], { stdin: Buffer.from('bytes') })).stdout, 'bytes');
  r = await sb.exec('kill -9 $$');
  assert.deepEqual([r.exitCode, r.signal], [137, 9]);
  r = await sb.exec(['sleep', '30'], { timeoutS: 1 });
  assert.ok(r.timedOut && !r.ok);
  r = await sb.exec("head -c 5000 /dev/zero | tr '\\0' x", { outputCap: 100 });
  assert.ok(r.stdoutTruncated && r.stdout.length === 100);
  r = await sb.exec(['printf', '\\377\\000ok'], { binary: true });
  assert.deepEqual(r.stdoutRaw, Buffer.from([0xff, 0, 0x6f, 0x6b]));
});

test('busy and cancel', { skip }, async () => {
  const long = sb.exec(['sleep', '60']);
  await waitFor(async () => (await sb.info()).usage.foreground, 10000, 'the foreground command');
  await assert.rejects(sb.exec(['true']), (e) => e instanceof S.BusyError && e.status === 429 && e.code === 'busy');
  assert.equal(await sb.cancel(), 1);
  const r = await long;
  assert.ok(r.cancelled && !r.ok);
});

test('stream: chunks as they come, then the result', { skip }, async () => {
  const t0 = Date.now();
  const seen = [];
  for await (const item of sb.stream('echo one; sleep 1; echo two >&2; sleep 0.3; echo three')) {
    seen.push([Date.now() - t0, item]);
  }
  const chunks = seen.slice(0, -1).map(([, c]) => [c.stream, c.data]);
  assert.deepEqual(chunks, [['stdout', 'one\n'], ['stderr', 'two\n'], ['stdout', 'three\n']]);
  const [tEnd, result] = seen[seen.length - 1];
  assert.ok(seen[0][0] < tEnd - 500, 'the first chunk came before the end');
  assert.deepEqual([result.exitCode, result.stdout, result.stderr], [0, 'one\nthree\n', 'two\n']);
  await assert.rejects(async () => { for await (const _ of sb.stream(['true'], { timeoutS: 100000 })); }, S.BadRequestError);
});

test('background: start, output, wait, stop, commands', { skip }, async () => {
  const cmd = await sb.start('for i in 1 2 3; do echo bg$i; sleep 0.3; done; echo done >&2');
  assert.equal(cmd.status, 'running');
  await waitFor(async () => (await cmd.output({ offset: 0 })).stdout.data.startsWith('bg1'), 10000, 'output');
  const o1 = await cmd.output({ offset: 0 });
  const st = await cmd.wait({ timeoutMs: 20000 });
  assert.ok(st.status === 'exited' && st.exitCode === 0 && st.background);
  const o2 = await cmd.output();
  assert.equal(o2.stdout.offset, o1.stdout.next);
  assert.equal(o1.stdout.data + o2.stdout.data, 'bg1\nbg2\nbg3\n');
  assert.equal(o2.stderr.data, 'done\n');
  assert.ok((await sb.commands()).some((c) => c.id === cmd.id));
  assert.equal((await sb.command(cmd.id)).status, 'exited');
  const srv = await sb.start(['sleep', '600']);
  await assert.rejects(srv.wait({ timeoutMs: 500 }), (e) => e.name === 'TimeoutError'
    && e instanceof S.SluiceTimeoutError && e instanceof S.SluiceError && e.code === 'timeout');
  await srv.stop();
  assert.ok((await srv.wait({ timeoutMs: 20000 })).signal != null);
  const a = await sb.start(['sleep', '600']);
  assert.equal(await sb.cancel({ all: true }), 1);
  assert.ok((await a.wait({ timeoutMs: 20000 })).cancelled);
  await assert.rejects(sb.command('c999999'), S.NotFoundError);
});

test('install through the broker', { skip }, async () => {
  // install takes names only: pip is pointed at the test registry by its config file
  assert.ok((await sb.exec(`mkdir -p ~/.config/pip && printf '[global]\\nindex-url = ${INDEX}\\n`
    + "trusted-host = pypi.org\\n' > ~/.config/pip/pip.conf")).ok);
  const r = await sb.install('sluicedemo');
  assert.ok(r.ok && r.stdout.includes('Successfully installed sluicedemo'), r.stderr);
  assert.equal((await sb.exec(['python3', '-c', 'import sluicedemo; print(sluicedemo.VALUE)'])).stdout, '42\n');
  await assert.rejects(sb.install(['no-such-package-x']),
    (e) => e instanceof S.CommandError && e.result.exitCode !== 0);
  // the executor's own answers: tier off admits no registry; a name that is an option is 400
  const off = await make({ network: 'off' });
  await assert.rejects(off.install('sluicedemo'),
    (e) => e instanceof S.NetworkNotPermittedError && e.code === 'network_not_permitted' && e.status === 403
      && e.tier === 'off' && e.ceiling === 'public' && e.effectiveTier === 'off');
  await assert.rejects(sb.install(['--index-url=http://x/']),
    (e) => e instanceof S.BadRequestError && e.status === 400 && e.code === 'bad_request');
  await assert.rejects(sb.install(['--global'], { manager: 'npm' }), S.BadRequestError);
  await assert.rejects(sb.install(['x'], { manager: 'cargo' }), TypeError);
});

async function subscribers(c) {
  const m = /^sluice_execd_event_subscribers (\S+)$/m.exec(await c.metrics());
  assert.ok(m, 'no sluice_execd_event_subscribers');
  return Number(m[1]);
}

test('metrics and events', { skip }, async () => {
  const c = make.client;
  assert.ok((await c.metrics()).includes('# TYPE sluice_execd_sandboxes_created_total counter'));
  const base = await subscribers(c);
  const sid = `sbx-ev${Date.now().toString(16)}`;
  const seen = (async () => {
    for await (const [event, data] of c.events({ idleTimeoutMs: 60000 })) {
      if (event === 'sandbox' && data.id === sid) return data;   // leaving closes the stream
    }
    return null;
  })();
  await waitFor(async () => (await subscribers(c)) > base, 20000, 'the subscription');
  await make({ id: sid });
  const data = await seen;
  assert.equal(data.what, 'created');
  assert.equal(data.tenant, 'acme');
  assert.equal(typeof data.ts_ms, 'number');
});

test('files: write, read ranges, list, edit, remove, errors', { skip }, async () => {
  assert.equal(await sb.write('a/b/c.txt', 'héllo'), 6);
  assert.equal(await sb.readText('/workspace/a/b/c.txt'), 'héllo');
  const data = Buffer.alloc(10240, 7);
  data[10] = 1;
  await sb.write('bin.dat', data);
  assert.deepEqual(await sb.read('bin.dat'), data);
  assert.deepEqual(await sb.read('bin.dat', { offset: 10, length: 5 }), data.subarray(10, 15));
  await sb.write('with space/ü?#%.txt', 'q');
  assert.equal(await sb.readText('with space/ü?#%.txt'), 'q');
  for (const p of ['x.txt', 'y.txt', 'z.py', 'd/inner.txt']) await sb.write(p, '1');
  assert.deepEqual((await sb.list({ glob: '*.txt' })).map((e) => e.path).sort(), ['x.txt', 'y.txt']);
  const all = (await sb.list({ glob: '*.txt', recursive: true })).map((e) => e.path);
  assert.ok(['d/inner.txt', 'x.txt', 'y.txt', 'a/b/c.txt'].every((p) => all.includes(p)) && !all.includes('z.py'));
  const top = await sb.list();
  const x = top.find((e) => e.path === 'x.txt');
  assert.deepEqual([x.type, x.size, x.mode, top.truncated], ['file', 1, '0644', false]);
  await sb.write('f.py', 'a = 1\nb = 2\nb = 2\n');
  await sb.edit('f.py', 'a = 1', 'a = 10');
  assert.equal(await sb.readText('f.py'), 'a = 10\nb = 2\nb = 2\n');
  await assert.rejects(sb.edit('f.py', 'b = 2', 'b = 3'), (e) => e instanceof S.ConflictError && e.code === 'conflict');
  await sb.remove('f.py');
  await assert.rejects(sb.read('f.py'), (e) => e instanceof S.NotFoundError && !(e instanceof S.SandboxNotFoundError));
  await assert.rejects(sb.write('big', Buffer.alloc((1 << 20) + 1)), (e) => e instanceof S.TooLargeError && e.status === 413);
  await sb.exec('head -c 1200000 /dev/zero > big; ln -sf /etc/shadow shadow');
  await assert.rejects(sb.read('big'), S.TooLargeError);
  assert.deepEqual(await sb.read('big', { offset: 1199990 }), Buffer.alloc(10));
  await assert.rejects(sb.read('shadow'), S.BadRequestError);
  await sb.write('dir/keep', '');
  await assert.rejects(sb.remove('dir'), S.ConflictError);
});

test('install under a tenant ceiling off: the error names the tier and the ceiling', { skip }, async () => {
  const admin = new S.BrokerClient(BROKER_URL, { token: TOKENS.broker_admin, ca: CA });
  await admin.ceilings.set({ tenants: { nonetjs: 'off' } });
  try {
    const sb = await make({ tenantId: 'nonetjs', network: 'registries' });
    await assert.rejects(sb.install('sluicedemo'), (e) => e instanceof S.NetworkNotPermittedError
      && e.tier === 'registries' && e.ceiling === 'off' && e.effectiveTier === 'off' && e.details.broker === 'ok');
  } finally {
    await admin.ceilings.set({ tenants: { nonetjs: null } });
  }
});

test('changed and artifacts are typed fields of the result', { skip }, async () => {
  const { createHash } = await import('node:crypto');
  const box = await make({});
  await box.write('old.txt', 'x');
  let r = await box.exec("printf abcd > mod.txt; rm old.txt; mkdir -p outputs; printf 'a chart' > outputs/chart.txt");
  const ch = Object.fromEntries(r.changed.map((c) => [c.path, c]));
  assert.deepEqual(ch['mod.txt'], { path: 'mod.txt', change: 'created', type: 'file', size: 4 });
  assert.equal(ch['old.txt'].change, 'deleted');
  assert.equal(ch.outputs.type, 'directory');
  assert.equal(r.changedTruncated, false);
  assert.deepEqual(r.artifacts, [{ path: 'outputs/chart.txt', size: 7,
    sha256: createHash('sha256').update('a chart').digest('hex') }]);
  assert.deepEqual(r.artifactsSkipped, []);
  r = await box.exec('for i in $(seq -w 1 21); do echo $i > outputs/f$i; done');
  assert.equal(r.artifacts.length, 20);
  assert.deepEqual(r.artifactsSkipped, [{ path: 'outputs/f21', size: 3, limit: 'count' }]);
  const cmd = await box.start('printf z > outputs/bg.txt');
  const st = await cmd.wait({ timeoutMs: 20000 });
  assert.deepEqual(st.artifacts.map((a) => a.path), ['outputs/bg.txt']);
});

test('outputCapTotal caps both streams together and says what it dropped', { skip }, async () => {
  let r = await sb.exec('printf aaaaaaaaaa; sleep 0.3; printf bbbbbbbbbb >&2; sleep 0.3; printf cccccccccc',
    { outputCapTotal: 15 });
  assert.deepEqual([r.stdout, r.stderr, r.outputDropped], ['aaaaaaaaaa', 'bbbbb', 15]);
  assert.ok(r.stdoutTruncated && r.stderrTruncated);
  r = await sb.exec("printf '\u00e9\u00e9\u00e9'", { outputCapTotal: 5 });
  assert.deepEqual([r.stdout, r.outputDropped], ['\u00e9\u00e9', 2]);
  assert.equal((await sb.exec('echo hi')).outputDropped, null);
  await assert.rejects(sb.exec('true', { outputCapTotal: -1 }),
    (e) => e instanceof S.BadRequestError && e.field === 'output_cap_total');
});
