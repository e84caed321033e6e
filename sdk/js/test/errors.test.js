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

test('install command lines', async () => {
  const { installCmd } = await import('../src/client.js');
  assert.deepEqual(installCmd(['a', 'b'], 'pip', null, []), ['python3', '-m', 'pip', 'install', '--user',
    '--break-system-packages', '--disable-pip-version-check', '--no-input', '--progress-bar', 'off', '--', 'a', 'b']);
  assert.deepEqual(installCmd('a', 'pip', 'http://mirror.test:8080/simple/', ['-q']).slice(-6),
    ['--index-url', 'http://mirror.test:8080/simple/', '--trusted-host', 'mirror.test', '-q', '--', 'a'].slice(-6));
  assert.deepEqual(installCmd(['left-pad'], 'npm', 'https://r.test/', []),
    ['npm', 'install', '--no-audit', '--no-fund', '--registry', 'https://r.test/', '--', 'left-pad']);
  assert.throws(() => installCmd(['a'], 'apt', null, []), TypeError);
});
