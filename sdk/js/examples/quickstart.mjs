// A chat's sandbox: create, run, stream, files, destroy.
// Address from SLUICE_EXEC_ADDRESS (default /run/sluice-execd/exec.sock).
import { SandboxClient, QuotaExceededError } from 'sluice';

const client = new SandboxClient();
let sb;
try {
  sb = await client.sandboxes.create({ tenantId: 'acme', userId: 'alice' });
} catch (e) {
  if (e instanceof QuotaExceededError) throw new Error(`quota: ${e.scope} has ${e.inUse} of ${e.limit}`);
  throw e;
}
try {
  const r = await sb.exec(['python3', '-c', 'print(6 * 7)']);
  console.log(r.exitCode, r.stdout.trim());
  await sb.write('data.txt', 'some content');
  console.log((await sb.read('data.txt')).toString());
  console.log((await sb.list({ glob: '*.txt' })).map((e) => [e.path, e.size]));
  for await (const item of sb.stream('for i in 1 2; do echo line$i; sleep 0.2; done')) {
    console.log('stream' in item ? `${item.stream}: ${item.data.trim()}` : `exit ${item.exitCode} in ${item.durationMs} ms`);
  }
} finally {
  await sb.destroy();
}
