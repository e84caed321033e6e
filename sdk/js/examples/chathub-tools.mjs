// The tools a chat model calls (ChatHub's Sandbox builtin), on sluice:
// runCommand (background: true for servers), getCommandOutput,
// stopCommand, readFile, writeFile, editFile, listFiles, exportFile.
// One sandbox per conversation; files, installs and background processes
// carry over between calls.  An error becomes {error, message} for the
// model to read, never an exception in the chat.
import { basename } from 'node:path';
import { SandboxClient, SluiceError, SandboxNotFoundError } from 'sluice';

const client = new SandboxClient();

/** The conversation's sandbox, made on first use (its id is the chat's). */
export async function sandboxFor(chatId, { tenantId, userId, network = 'registries' }) {
  try {
    return await client.sandboxes.get(chatId);
  } catch (e) {
    if (!(e instanceof SandboxNotFoundError)) throw e;
    return client.sandboxes.create({ id: chatId, tenantId, userId, network });
  }
}

export function tools(sb) {
  const commands = new Map();      // id -> Command (output() returns what is new)
  const tool = (fn) => async (args = {}) => {
    try { return await fn(args); } catch (e) {
      if (e instanceof SluiceError) return { error: e.code, message: e.apiMessage };
      throw e;
    }
  };
  const command = async (id) => commands.get(id) || sb.command(id);
  return {
    runCommand: tool(async ({ command: cmd, background = false, timeoutMs = null }) => {
      const timeoutS = timeoutMs ? Math.ceil(timeoutMs / 1000) : null;
      if (background) {
        const c = await sb.start(['bash', '-lc', cmd], { timeoutS });
        commands.set(c.id, c);
        return { commandId: c.id, status: c.status };
      }
      const r = await sb.exec(['bash', '-lc', cmd], { timeoutS });
      return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut,
        truncated: r.stdoutTruncated || r.stderrTruncated };
    }),
    getCommandOutput: tool(async ({ commandId }) => {
      const o = await (await command(commandId)).output();
      return { status: o.status.status, exitCode: o.status.exitCode, stdout: o.stdout.data, stderr: o.stderr.data };
    }),
    stopCommand: tool(async ({ commandId }) => {
      const c = await command(commandId);
      await c.stop();
      return { status: (await c.wait({ timeoutMs: 10000 })).status };
    }),
    readFile: tool(async ({ path }) => ({ path, content: await sb.readText(path) })),
    writeFile: tool(async ({ path, content }) => ({ path, bytes: await sb.write(path, content) })),
    editFile: tool(async ({ path, oldString, newString }) => {
      await sb.edit(path, oldString, newString);
      return { path, edited: true };
    }),
    listFiles: tool(async ({ path = null, glob = '*', recursive = false }) =>
      (await sb.list({ path, glob, recursive })).map((e) => ({ path: e.path, type: e.type, size: e.size }))),
    // copy a sandbox file into the chat: the app stores the bytes as an attachment
    exportFile: tool(async ({ path }) => {
      const data = await sb.read(path);
      return { name: basename(path), size: data.length, base64: data.toString('base64') };
    }),
  };
}

// A conversation's calls, as a model would make them.
if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) {
  const sb = await sandboxFor(`chat-${process.pid}`, { tenantId: 'acme', userId: 'alice' });
  const t = tools(sb);
  try {
    const show = (name, v) => console.log(name, JSON.stringify(v));
    show('writeFile', await t.writeFile({ path: 'app.py', content: 'print("hello")\n' }));
    show('editFile', await t.editFile({ path: 'app.py', oldString: 'hello', newString: 'hello, chat' }));
    show('runCommand', await t.runCommand({ command: 'python3 app.py' }));
    const bg = await t.runCommand({ command: 'for i in 1 2 3; do echo tick $i; sleep 0.3; done', background: true });
    show('runCommand', bg);
    await new Promise((r) => setTimeout(r, 500));
    show('getCommandOutput', await t.getCommandOutput({ commandId: bg.commandId }));
    await new Promise((r) => setTimeout(r, 800));
    show('getCommandOutput', await t.getCommandOutput({ commandId: bg.commandId }));
    const srv = await t.runCommand({ command: 'python3 -m http.server 8000', background: true });
    show('stopCommand', await t.stopCommand({ commandId: srv.commandId }));
    show('listFiles', await t.listFiles({ glob: '*.py' }));
    show('readFile', await t.readFile({ path: 'app.py' }));
    show('exportFile', await t.exportFile({ path: 'app.py' }));
    show('readFile', await t.readFile({ path: 'missing.txt' }));
  } finally {
    await sb.destroy();
  }
}
