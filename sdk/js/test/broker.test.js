import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import * as S from '../src/index.js';
import { skip, BROKER, BROKER_URL, CA, TOKENS, WEB, WEB_PORT, ENV, uid, client, maker, take, waitFor, nonEmpty } from './helpers.js';

const make = maker();
after(() => make.cleanup());

const curl = (sb, path = '/') => sb.start(['curl', '-sS', '--max-time', '60', WEB.replace(/\/$/, '') + path]);

test('sessions, grants; ceilings for admins only', { skip }, async () => {
  const b = new S.BrokerClient(BROKER);
  const id = uid('chat');
  const s = await b.sessions.create({ id, tenant: 'acme', user: 'alice', tier: 'registries' });
  try {
    assert.deepEqual([s.id, s.tier, s.transport], [id, 'registries', 'unix']);
    assert.ok(s.socket.endsWith(`/${id}/proxy.sock`));
    assert.ok((await b.sessions.list()).some((x) => x.id === id));
    assert.equal((await b.sessions.setTier(id, 'public')).tier, 'public');
    await assert.rejects(b.sessions.create({ id, tier: 'off' }), S.ConflictError);
    const g = await b.grants.add(id, 'Example.ORG', 8443);
    assert.deepEqual(g, { host: 'example.org', port: 8443 });
    await b.grants.add(id, '2001:db8::1', 443);
    assert.deepEqual(await b.grants.list(id), [{ host: 'example.org', port: 8443 }, { host: '2001:db8::1', port: 443 }]);
    await b.grants.remove(id, 'example.org', 8443);
    await b.grants.remove(id, '2001:db8::1', 443);
    await assert.rejects(b.grants.remove(id, 'example.org', 8443), S.NotFoundError);
  } finally {
    await b.sessions.delete(id);
  }
  await assert.rejects(b.sessions.get(id), S.NotFoundError);
  await assert.rejects(b.ceilings.get(), (e) => e instanceof S.ForbiddenError && e.status === 403);
  const admin = new S.BrokerClient(BROKER_URL, { token: TOKENS.broker_admin, ca: CA });
  assert.equal((await admin.ceilings.get()).tier, 'public');
  const t = uid('tenant');
  assert.equal((await admin.ceilings.set({ tenants: { [t]: 'registries' } })).tenants[t], 'registries');
  assert.ok(!(t in (await admin.ceilings.set({ tenants: { [t]: null } })).tenants));
  assert.match(await admin.metrics(), /sluice_prompts_pending/);
  const app = new S.BrokerClient(BROKER_URL, { token: TOKENS.broker_app, ca: CA });
  await assert.rejects(app.ceilings.set({ tier: 'off' }), S.ForbiddenError);
  await assert.rejects(new S.BrokerClient(BROKER_URL, { token: 'wrong-token-0123456789', ca: CA }).health(), S.UnauthorizedError);
});

test('prompts: allowOnce, deny, allowChat from a watch', { skip }, async () => {
  const sb = await make({ network: 'registries' });
  const b = make.client.broker;
  const w = b.prompts.watch({ session: sb.session });
  try {
    let cmd = await curl(sb);
    let p = await take(w);
    assert.ok(p instanceof S.Prompt);
    assert.deepEqual([p.session, p.tenant, p.host, p.port, p.method, p.path, p.tier, p.ceiling, p.state],
      [sb.session, 'acme', 'web.test', WEB_PORT, 'GET', '/', 'registries', 'public', 'pending']);
    assert.equal(p.target, `web.test:${WEB_PORT}`);
    const n = await p.allowOnce();
    assert.equal(n.state, 'allow_once');
    assert.equal(p.state, 'allow_once');
    await cmd.wait({ timeoutMs: 60000 });
    assert.equal((await cmd.output({ offset: 0 })).stdout.data, 'hello from web.test\n');
    await assert.rejects(p.deny(), S.ConflictError);
    cmd = await curl(sb);
    await (await take(w)).deny();
    await cmd.wait({ timeoutMs: 60000 });
    assert.match((await cmd.output({ offset: 0 })).stdout.data, /user_denied/);
    cmd = await curl(sb);
    await (await take(w)).allowChat();
    await cmd.wait({ timeoutMs: 60000 });
    assert.equal((await cmd.output({ offset: 0 })).stdout.data, 'hello from web.test\n');
    assert.ok((await b.grants.list(sb.session)).some((g) => g.host === 'web.test' && g.port === WEB_PORT));
  } finally {
    w.close();
  }
});

test('a watch shows what was pending, and for-await ends on close', { skip }, async () => {
  const sb = await make({ network: 'registries' });
  const b = make.client.broker;
  const cmd = await curl(sb, '/late');
  const pid = (await waitFor(async () => nonEmpty((await b.prompts.list()).filter((p) => p.session === sb.session)), 20000, 'the prompt'))[0].id;
  const w = b.prompts.watch({ session: sb.session });
  for await (const p of w) {
    assert.equal(p.id, pid);
    assert.equal(p.path, '/late');
    await p.deny();
    break;
  }
  await cmd.wait({ timeoutMs: 60000 });
});

test('events: a session event, then a replay from lastEventId', { skip }, async () => {
  const b = new S.BrokerClient(BROKER);
  const ev = b.events();
  const id = uid('ev');
  const first = ev.next();
  await waitFor(() => ev.connects > 0, 10000, 'the stream');
  await b.sessions.create({ id, tier: 'off' });
  let e = (await first).value;
  while (!(e.type === 'session' && e.data.session && e.data.session.id === id)) e = await take(ev);
  assert.equal(e.data.action, 'create');
  assert.equal(ev.lastEventId, e.id);
  ev.close();
  await b.sessions.delete(id);
  const later = b.events({ lastEventId: e.id - 1 });
  assert.equal((await take(later)).id, e.id);
  later.close();
});

test('webhook: sluiced signs, verify() checks', { skip }, async () => {
  const secret = readFileSync(ENV.SLUICE_TEST_HOOK_SECRET);
  const got = [];
  const srv = https.createServer({ key: readFileSync(ENV.SLUICE_TEST_HOOK_KEY), cert: CA }, (req, res) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(parts) });
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ decision: 'allow_once' }));
    });
  });
  await new Promise((r) => srv.listen(Number(ENV.SLUICE_TEST_HOOK_PORT), '127.0.0.1', r));
  try {
    const sb = await make({ network: 'registries' });
    const r = await sb.exec(['curl', '-sS', '--max-time', '60', WEB]);
    assert.equal(r.stdout, 'hello from web.test\n', JSON.stringify(r));
    const d = (await waitFor(() => nonEmpty(got.filter((g) => JSON.parse(g.body).session === sb.session)), 30000, 'a delivery'))[0];
    const ts = d.headers['x-sluice-timestamp'];
    const sig = d.headers['x-sluice-signature'];
    assert.ok(S.webhook.verify(secret, ts, d.body, sig));
    assert.ok(S.webhook.verify(secret.toString(), Number(ts), d.body.toString(), sig));
    assert.equal(S.webhook.sign(secret, ts, d.body), sig);
    assert.ok(!S.webhook.verify(secret, ts, Buffer.concat([d.body, Buffer.from(' ')]), sig));
    assert.ok(!S.webhook.verify('another secret', ts, d.body, sig));
    assert.ok(!S.webhook.verify(secret, String(Number(ts) + 1), d.body, sig));
    assert.ok(!S.webhook.verify(secret, ts, d.body, null));
    assert.ok(!S.webhook.verify(secret, ts, d.body, sig, { now: Number(ts) + 3600 }));
    assert.ok(S.webhook.verify(secret, ts, d.body, sig, { toleranceS: null, now: Number(ts) + 3600 }));
  } finally {
    await new Promise((r) => srv.close(r));
  }
});

test('connect() makes the watch an approver before its first prompt', { skip }, async () => {
  const b = new S.BrokerClient(BROKER);
  const before = (await b.health()).approvers;
  const w = b.prompts.watch();
  assert.equal((await b.health()).approvers, before);
  assert.equal(await w.connect(), w);
  assert.equal(w.events.connects, 1);
  assert.equal((await b.health()).approvers, before + 1);
  w.close();
  await waitFor(async () => (await b.health()).approvers === before, 10000, 'the close');
});

test('a stream silent for longer than idleTimeoutMs is opened again', { skip }, async () => {
  const ev = new S.BrokerClient(BROKER).events({ idleTimeoutMs: 500 });
  const pending = ev.next().catch(() => null);
  try {
    await waitFor(() => ev.connects >= 3, 10000, 'reconnects');
  } finally {
    ev.close();
    await pending;
  }
});
