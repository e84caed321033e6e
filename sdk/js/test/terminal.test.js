// Terminals (Sandbox.terminal: a shell on a pty over a WebSocket) and
// ports (Sandbox.fetch, portUrl: the executor's port proxy).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../src/index.js';
import { skip, maker, EXEC_URL, TOKENS, CA } from './helpers.js';

const make = maker();
let sb;
before(async () => { if (!skip) sb = await make({ network: 'registries' }); });
after(() => make.cleanup());
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('terminal: input, size, Ctrl-C, detach and replay, takeover, exit', { skip }, async () => {
  const t = await sb.terminal({ cols: 100, rows: 30 });
  assert.ok(t.attached && t.id);
  t.send('echo js-$((6*7))\n');
  await t.readUntil('js-42');
  t.send('stty size\n');
  await t.readUntil('30 100');
  t.resize(120, 40);
  t.send('stty size\n');
  await t.readUntil('40 120');
  t.send('sleep 30; echo late-$((1+1))\n');
  await sleep(700);
  t.send('\x03');
  t.send('echo back-$((2+3))\n');
  assert.ok(!(await t.readUntil('back-5', { timeoutMs: 10000 })).includes('late-2'));
  const info = await t.info();
  assert.deepEqual([info.running, info.attached, info.cols, info.rows], [true, true, 120, 40]);
  t.send('sleep 1; echo away-$((3*3))\n');
  await t.readUntil('echo away-');
  await sleep(200);
  await t.read({ timeoutMs: 200 });
  const seen = t.offset;
  await t.detach();
  assert.ok(!t.attached);
  await sleep(2000);
  const t2 = await (await sb.terminalOf(t.id)).attach({ since: seen });
  await t2.readUntil('away-9', { timeoutMs: 5000 });
  await assert.rejects((await sb.terminalOf(t.id)).attach(), S.ConflictError);
  const t3 = await (await sb.terminalOf(t.id)).attach({ takeover: true });
  for (let i = 0; i < 20 && t2.attached; i++) await t2.read({ timeoutMs: 500 });
  assert.equal(t2.closeCode, 4001);
  assert.deepEqual(t2.errors.map((e) => e.code), ['TAKEN_OVER']);
  t3.send('exit 4\n');
  for (let i = 0; i < 40 && t3.attached; i++) await t3.read({ timeoutMs: 500 });
  assert.equal(t3.exitCode, 4);
  assert.equal((await t3.info()).exitCode, 4);
});

test('ports: fetch through the port proxy, over https too', { skip }, async () => {
  await sb.write('site/index.txt', 'from js\n');
  await sb.start('cd site && exec python3 -m http.server 8000 --bind 127.0.0.1');
  let r;
  for (let i = 0; i < 100; i++) {
    try { r = await sb.fetch(8000, { path: '/index.txt' }); break; } catch (e) {
      assert.equal(e.code, 'bad_gateway');
      await sleep(100);
    }
  }
  assert.equal(r.status, 200);
  assert.equal(r.text(), 'from js\n');
  assert.equal(r.header('x-sluice-upstream'), null);
  assert.equal((await sb.fetch(8000, { path: '/missing' })).status, 404);
  assert.equal((await sb.fetch(8000, { path: '/x', method: 'POST', body: 'd' })).status, 501);
  await assert.rejects(sb.fetch(8009), (e) => e.code === 'bad_gateway');
  assert.throws(() => sb.portUrl(70000), S.InvalidArgumentError);
  assert.ok(sb.portUrl(8000, 'a').endsWith(`/v1/sandboxes/${sb.id}/ports/8000/a`));
  const c = new S.SandboxClient(EXEC_URL, { token: TOKENS.exec_acme, ca: CA });
  const mine = await c.sandboxes.get(sb.id);
  r = await mine.fetch(8000, { path: '/index.txt' });
  assert.equal(r.text(), 'from js\n');
  const t = await mine.terminal();
  t.send('echo https-$((4*4))\n');
  await t.readUntil('https-16');
  await t.detach();
});
