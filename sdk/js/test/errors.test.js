// Each API code becomes its class, with the API's fields.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../src/index.js';

const body = (code, message = 'm', extra = {}) => Buffer.from(JSON.stringify({ error: { code, message, ...extra } }));

test('one class per code', () => {
  const cases = [
    [400, 'bad_request', S.BadRequestError], [401, 'unauthorized', S.UnauthorizedError],
    [403, 'forbidden', S.ForbiddenError], [403, 'network_not_permitted', S.NetworkNotPermittedError],
    [404, 'not_found', S.NotFoundError], [409, 'exists', S.ConflictError], [409, 'conflict', S.ConflictError],
    [413, 'too_large', S.TooLargeError], [429, 'quota_exceeded', S.QuotaExceededError], [429, 'busy', S.BusyError],
    [503, 'backend_unavailable', S.BackendUnavailableError], [503, 'broker_unavailable', S.BrokerUnavailableError],
  ];
  for (const [status, code, Cls] of cases) {
    const e = S.errorFrom(status, body(code, 'what happened'));
    assert.equal(e.constructor, Cls, code);
    assert.ok(e instanceof S.SluiceError && e instanceof Error);
    assert.deepEqual([e.status, e.code, e.apiMessage, e.message, e.name],
      [status, code, 'what happened', `${status} ${code}: what happened`, Cls.name]);
  }
});

test('fields and fallbacks', () => {
  let e = S.errorFrom(429, body('quota_exceeded', 'm', { scope: 'tenant', limit: 50, in_use: 50 }));
  assert.deepEqual([e.scope, e.limit, e.inUse], ['tenant', 50, 50]);
  e = S.errorFrom(400, body('bad_request', 'm', { field: 'pids', max: 4096 }));
  assert.deepEqual([e.field, e.max], ['pids', 4096]);
  assert.equal(S.errorFrom(503, body('unavailable'), { broker: true }).constructor, S.BrokerUnavailableError);
  assert.equal(S.errorFrom(413, body('payload_too_large'), { broker: true }).constructor, S.TooLargeError);
  e = S.errorFrom(413, Buffer.from('<html>Payload Too Large</html>'));
  assert.ok(e instanceof S.TooLargeError && e.code === 'too_large');
  e = S.errorFrom(503, Buffer.alloc(0));
  assert.ok(e instanceof S.BackendUnavailableError && e.apiMessage === 'HTTP 503');
  e = S.errorFrom(500, body('internal'));
  assert.ok(e.constructor === S.SluiceError && e.code === 'internal');
  assert.equal(S.errorFrom(404, body('not_found', 'no sandbox x'), { sandbox: true }).constructor, S.SandboxNotFoundError);
  assert.equal(S.errorFrom(404, body('not_found', 'a: no such file'), { sandbox: true }).constructor, S.NotFoundError);
});

test('webhook sign and verify, offline', () => {
  const sig = S.webhook.sign('secret\n', 1700000000, '{"id":"p-1"}');
  // openssl dgst -sha256 -hmac secret over '1700000000.{"id":"p-1"}'
  assert.equal(sig, 'sha256=8bfb37ab61093a0fa9ed080745bf15dea2b48453140a29da2a3829c1b7c17a81');
  assert.equal(sig, S.webhook.sign('secret', '1700000000', Buffer.from('{"id":"p-1"}')));
  assert.ok(S.webhook.verify('secret', '1700000000', '{"id":"p-1"}', sig, { now: 1700000100 }));
  assert.ok(!S.webhook.verify('secret', '1700000000', '{"id":"p-1"}', sig));   // too old
  assert.ok(!S.webhook.verify('secret', '17e8', '{"id":"p-1"}', sig, { toleranceS: null }));
  assert.ok(!S.webhook.verify('secret', '1700000000', '{"id":"p-1"}', sig.toUpperCase(), { toleranceS: null }));
});

test('install bodies', async () => {
  const { installBody } = await import('../src/client.js');
  assert.deepEqual(installBody(['a', 'b'], 'pip', null), { manager: 'pip', packages: ['a', 'b'] });
  assert.deepEqual(installBody('left-pad', 'npm', 30), { manager: 'npm', packages: ['left-pad'], timeout_s: 30 });
  assert.throws(() => installBody(['a'], 'apt', null), TypeError);
  assert.throws(() => installBody([], 'pip', null), TypeError);
});

// Every route of sluice-execd's OpenAPI document and the SDK call that
// makes it (as in the Python SDK's tests): a new route fails here until
// the SDK has it.
const ROUTES = {
  'GET /v1/health': 'client.health client.doctor',
  'GET /v1/metrics': 'client.metrics',
  'GET /v1/events': 'client.events',
  'GET /v1/sandboxes': 'sandboxes.list',
  'POST /v1/sandboxes': 'sandboxes.create',
  'GET /v1/sandboxes/{id}': 'sandboxes.get Sandbox.info',
  'PATCH /v1/sandboxes/{id}': 'Sandbox.setNetwork',
  'DELETE /v1/sandboxes/{id}': 'Sandbox.destroy',
  'POST /v1/sandboxes/{id}/exec': 'Sandbox.exec Sandbox.stream',
  'POST /v1/sandboxes/{id}/install': 'Sandbox.install',
  'POST /v1/sandboxes/{id}/commands': 'Sandbox.start',
  'GET /v1/sandboxes/{id}/commands': 'Sandbox.commands',
  'GET /v1/sandboxes/{id}/commands/{cid}': 'Sandbox.command Command.refresh Command.wait',
  'GET /v1/sandboxes/{id}/commands/{cid}/output': 'Command.output',
  'POST /v1/sandboxes/{id}/commands/{cid}/stop': 'Command.stop',
  'POST /v1/sandboxes/{id}/cancel': 'Sandbox.cancel',
  'GET /v1/sandboxes/{id}/files': 'Sandbox.list',
  'GET /v1/sandboxes/{id}/files/{path}': 'Sandbox.read Sandbox.readText',
  'PUT /v1/sandboxes/{id}/files/{path}': 'Sandbox.write',
  'DELETE /v1/sandboxes/{id}/files/{path}': 'Sandbox.remove',
  'POST /v1/sandboxes/{id}/edit': 'Sandbox.edit',
  'PUT /v1/sandboxes/{id}/archive': 'Sandbox.putTar',
  'GET /v1/sandboxes/{id}/archive': 'Sandbox.getTar',
  'GET /healthz': 'client.healthz',
  'GET /v1/node': 'client.node',
  'PUT /v1/node': 'client.setDraining',
  'POST /v1/sandboxes/{id}/pty': 'Sandbox.terminal',
  'GET /v1/sandboxes/{id}/pty/{sid}': 'Sandbox.terminalOf Terminal.info',
  'DELETE /v1/sandboxes/{id}/pty/{sid}': 'Terminal.kill',
  'GET /v1/sandboxes/{id}/pty/{sid}/ws': 'Terminal.attach',
  'GET /v1/sandboxes/{id}/ports/{port}': 'Sandbox.fetch',
  'POST /v1/sandboxes/{id}/ports/{port}': 'Sandbox.fetch',
  'PUT /v1/sandboxes/{id}/ports/{port}': 'Sandbox.fetch',
  'PATCH /v1/sandboxes/{id}/ports/{port}': 'Sandbox.fetch',
  'DELETE /v1/sandboxes/{id}/ports/{port}': 'Sandbox.fetch',
  'GET /v1/sandboxes/{id}/ports/{port}/': 'Sandbox.fetch',
  'POST /v1/sandboxes/{id}/ports/{port}/': 'Sandbox.fetch',
  'PUT /v1/sandboxes/{id}/ports/{port}/': 'Sandbox.fetch',
  'PATCH /v1/sandboxes/{id}/ports/{port}/': 'Sandbox.fetch',
  'DELETE /v1/sandboxes/{id}/ports/{port}/': 'Sandbox.fetch',
  'GET /v1/sandboxes/{id}/ports/{port}/{path}': 'Sandbox.fetch',
  'POST /v1/sandboxes/{id}/ports/{port}/{path}': 'Sandbox.fetch',
  'PUT /v1/sandboxes/{id}/ports/{port}/{path}': 'Sandbox.fetch',
  'PATCH /v1/sandboxes/{id}/ports/{port}/{path}': 'Sandbox.fetch',
  'DELETE /v1/sandboxes/{id}/ports/{port}/{path}': 'Sandbox.fetch',
};

test('every executor route has a call', { skip: !process.env.SLUICE_TEST_OPENAPI && 'no SLUICE_TEST_OPENAPI' }, async () => {
  const { readFileSync } = await import('node:fs');
  const doc = JSON.parse(readFileSync(process.env.SLUICE_TEST_OPENAPI, 'utf8'));
  const routes = [];
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const m of Object.keys(ops)) if (['get', 'put', 'post', 'patch', 'delete'].includes(m)) routes.push(`${m.toUpperCase()} ${p}`);
  }
  assert.deepEqual(routes.sort(), Object.keys(ROUTES).sort());
  const cls = { Sandbox: S.Sandbox, Command: S.Command, Terminal: S.Terminal, client: S.SandboxClient };
  for (const names of Object.values(ROUTES)) {
    for (const n of names.split(' ')) {
      const [c, m] = n.split('.');
      if (cls[c]) assert.equal(typeof cls[c].prototype[m], 'function', n);
    }
  }
});

test('what the SDK refuses before a call is an InvalidArgumentError: a SluiceError and a TypeError', async () => {
  const { installBody, commandBody, checkId } = await import('../src/client.js');
  const c = new S.SandboxClient('/nonexistent/exec.sock', { broker: '/nonexistent/control.sock' });
  const sb = new S.Sandbox(c, { id: 'x', limits: {} });
  const refused = [
    () => checkId('sandbox id', '../etc'),
    () => commandBody([]),
    () => installBody(['a'], 'apt', null),
    () => installBody([], 'pip', null),
    () => sb.read(''),
    () => sb.read('a.txt', { length: 0 }),
    () => new S.SandboxClient('http://127.0.0.1:1'),
    () => new S.SandboxClient('/x.sock', { token: 'a-token-on-a-socket' }),
    () => new S.BrokerClient('http://127.0.0.1:1'),
  ];
  for (const [i, f] of refused.entries()) {
    assert.throws(f, (e) => e instanceof S.InvalidArgumentError && e instanceof S.SluiceError
      && e instanceof TypeError && e.code === 'invalid_argument' && e.status === null
      && e.name === 'InvalidArgumentError' && e.apiMessage === e.message, `case ${i}`);
  }
  await assert.rejects(c.sandboxes.create({ tenantId: 'a', userId: 'b', id: '../etc' }), S.InvalidArgumentError);
  await assert.rejects(async () => c.broker.sessions.create({ id: '../etc' }), S.InvalidArgumentError);
  await assert.rejects(async () => c.broker.ceilings.set({}), S.InvalidArgumentError);
  await assert.rejects(async () => c.broker.prompts.answer('p-1', 'maybe'), S.InvalidArgumentError);
  // an error the API sent is not one
  assert.ok(!(S.errorFrom(400, body('bad_request')) instanceof S.InvalidArgumentError));
  assert.ok(!(S.errorFrom(400, body('bad_request')) instanceof TypeError));
  // a prompt not read through a client cannot be answered
  await assert.rejects(new S.Prompt({ id: 'p-1' }).allowOnce(),
    (e) => e instanceof S.InvalidStateError && e instanceof S.SluiceError && e.code === 'invalid_state');
});

test('network_not_permitted carries tier, ceiling and effective tier', () => {
  let e = S.errorFrom(403, body('network_not_permitted', 'm', { tier: 'off', effective_tier: 'off', ceiling: 'public' }));
  assert.ok(e instanceof S.NetworkNotPermittedError);
  assert.deepEqual([e.tier, e.effectiveTier, e.ceiling], ['off', 'off', 'public']);
  e = S.errorFrom(403, body('network_not_permitted'));
  assert.deepEqual([e.tier, e.effectiveTier, e.ceiling], [null, null, null]);
});
