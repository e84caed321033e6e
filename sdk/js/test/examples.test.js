// The examples of the README run as shown (their output is what it prints).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { skip, EXEC, BROKER } from './helpers.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'examples');

function example(name) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(dir, name)], {
      env: { ...process.env, SLUICE_EXEC_ADDRESS: EXEC, SLUICE_BROKER_ADDRESS: BROKER }, timeout: 120000,
    }, (err, stdout, stderr) => {
      if (process.env.SLUICE_SDK_S) console.log(stdout);
      if (err) reject(new Error(`${name}: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

test('examples/quickstart.mjs', { skip }, async () => {
  const out = (await example('quickstart.mjs')).split('\n');
  assert.deepEqual(out.slice(0, 3), ['0 42', 'some content', "[ [ 'data.txt', 12 ] ]"]);
  assert.deepEqual(out.slice(3, 5), ['stdout: line1', 'stdout: line2']);
  assert.match(out[5], /^exit 0 in \d+ ms$/);
});

test('examples/chathub-tools.mjs', { skip }, async () => {
  const lines = (await example('chathub-tools.mjs')).trim().split('\n');
  const calls = lines.map((l) => [l.slice(0, l.indexOf(' ')), JSON.parse(l.slice(l.indexOf(' ') + 1))]);
  const get = (i) => calls[i][1];
  assert.deepEqual(calls.map((c) => c[0]), ['writeFile', 'editFile', 'runCommand', 'runCommand', 'getCommandOutput',
    'getCommandOutput', 'stopCommand', 'listFiles', 'readFile', 'exportFile', 'readFile']);
  assert.equal(get(2).stdout, 'hello, chat\n');
  assert.equal(get(4).stdout + get(5).stdout, 'tick 1\ntick 2\ntick 3\n');
  assert.equal(get(5).status, 'exited');
  assert.equal(get(6).status, 'exited');
  assert.deepEqual(get(7), [{ path: 'app.py', type: 'file', size: 21 }]);
  assert.equal(Buffer.from(get(9).base64, 'base64').toString(), 'print("hello, chat")\n');
  assert.equal(get(10).error, 'not_found');
});
