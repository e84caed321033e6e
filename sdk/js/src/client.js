// The client of sluice-execd(8): sandboxes, commands and files.
import { randomBytes } from 'node:crypto';
import { Transport, SSEParser, jsonCall, q, query, addressString } from './http.js';
import { CommandError, InvalidArgumentError, SluiceConnectionError, SluiceError, SluiceTimeoutError } from './errors.js';
import * as M from './models.js';
import { BrokerClient } from './broker.js';
import { portFetch, portPath, terminalGet, terminalStart } from './pty.js';

export const DEFAULT_EXEC_ADDRESS = '/run/sluice-execd/exec.sock';
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// the executor's deadline is at most limits_max.timeout_s (28 min by default)
const EXEC_MAX_S = 1680;
const MARGIN_S = 30;

const json = (r) => (r.body.length ? JSON.parse(r.body.toString('utf8')) : null);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function checkId(what, v) {
  if (typeof v !== 'string' || !ID.test(v)) {
    throw new InvalidArgumentError(`${what} ${JSON.stringify(v)}: 1 to 64 of A-Z a-z 0-9 . _ - (not starting with . _ -)`);
  }
  return v;
}

/** The body of exec and commands: an array is argv, a string a shell line. */
export function commandBody(cmd, { timeoutS, env, cwd, stdin, outputCap, outputCapTotal, binary } = {}) {
  const b = {};
  if (typeof cmd === 'string') b.shell = cmd;
  else {
    if (!Array.isArray(cmd) || !cmd.length || !cmd.every((a) => typeof a === 'string')) {
      throw new InvalidArgumentError('cmd: a non-empty array of strings, or a string');
    }
    b.cmd = [...cmd];
  }
  if (env != null) b.env = { ...env };
  if (cwd != null) b.cwd = cwd;
  if (timeoutS != null) b.timeout_s = timeoutS;
  if (stdin != null) b.stdin = Buffer.isBuffer(stdin) ? stdin.toString('utf8') : stdin;
  if (outputCap != null) b.output_cap = outputCap;
  if (outputCapTotal != null) b.output_cap_total = outputCapTotal;
  if (binary) b.encoding = 'base64';
  return b;
}

/** The body of POST /install: the executor builds the command line
 * itself and refuses (400) what is not a bare package name. */
export function installBody(packages, manager, timeoutS) {
  const pk = typeof packages === 'string' ? [packages] : [...(packages || [])];
  if (!pk.length || !pk.every((p) => typeof p === 'string' && p)) throw new InvalidArgumentError('packages: one or more names');
  if (manager !== 'pip' && manager !== 'npm') throw new InvalidArgumentError(`manager: pip or npm, not ${JSON.stringify(manager)}`);
  const b = { manager, packages: pk };
  if (timeoutS != null) b.timeout_s = timeoutS;
  return b;
}

function filePath(p) {
  if (typeof p !== 'string' || !p || p.includes('\0')) throw new InvalidArgumentError('path: a non-empty string');
  return p.split('/').map(q).join('/');
}

function newId() { return `sbx-${randomBytes(6).toString('hex')}`; }

export function doctorOf(h, err) {
  if (!h) return { ok: false, problems: [`sluice-execd does not answer: ${err && err.message}`], health: null };
  const p = [];
  const d = h.backends.find((b) => b.name === h.defaultBackend);
  if (d && !d.ok) p.push(`the default backend ${h.defaultBackend} cannot run here: ${d.reason}`);
  if (!h.broker.ok) {
    p.push(`sluiced does not answer sluice-execd on its control socket (${h.broker.reason || h.broker.socket || '?'}): sandboxes cannot be created`);
  }
  const sb = h.capacity.sandboxes;
  if (sb && sb.left === 0) p.push(`no sandbox left: the host's ${sb.limit} are in use (quotas.sandboxes)`);
  return { ok: !p.length, problems: p, health: h };
}

/**
 * A client of sluice-execd.  `address` is its Unix socket (default
 * $SLUICE_EXEC_ADDRESS or /run/sluice-execd/exec.sock: the daemon takes
 * your uid and groups as your role) or an https:// URL, then with
 * `token` (default $SLUICE_EXEC_TOKEN).  `broker` and `brokerToken` are
 * sluiced's control API likewise.  `ca` verifies https servers.
 */
export class SandboxClient {
  constructor(address = null, { token = null, broker = null, brokerToken = null, ca = null,
    timeoutMs = 60000, createTimeoutMs = 120000 } = {}) {
    const addr = address ?? process.env.SLUICE_EXEC_ADDRESS ?? DEFAULT_EXEC_ADDRESS;
    const tok = token ?? (addr.includes('://') ? process.env.SLUICE_EXEC_TOKEN || null : null);
    this._t = new Transport(addr, { token: tok, ca, timeoutMs });
    this._createTimeoutMs = createTimeoutMs;
    this._brokerArgs = { address: broker, token: brokerToken, ca };
    this._broker = null;
    this.sandboxes = new Sandboxes(this);
  }

  get address() { return addressString(this._t.address); }

  /** sluiced's control API: sessions, ceilings, grants, prompts. */
  get broker() {
    if (!this._broker) {
      const { address, token, ca } = this._brokerArgs;
      this._broker = new BrokerClient(address, { token, ca });
    }
    return this._broker;
  }

  /** GET /v1/health: backends, broker, capacity. */
  health() { return this._t.call(jsonCall('GET', '/v1/health', (r) => M.health(json(r)))); }

  /**
   * GET /healthz, a load balancer's probe (no role or token needed):
   * {ok, imageReady}, ok false when no sandbox can be made now (its 503,
   * whose body is the answer, not an error).
   */
  async healthz() {
    try {
      const d = await this._t.call(jsonCall('GET', '/healthz', json));
      return { ok: !!d.ok, imageReady: !!d.image_ready };
    } catch (e) {
      if (e.status !== 503) throw e;
      let d = {};
      try { d = JSON.parse(e.message); } catch { /* not the body */ }
      return { ok: false, imageReady: !!d.image_ready };
    }
  }

  /**
   * GET /v1/node (auditor): what a fleet places sandboxes by: host,
   * version, backends, capacity, draining and, while draining, remaining
   * (docs/scale.md).  Returned as the daemon says it (snake_case).
   */
  node() { return this._t.call(jsonCall('GET', '/v1/node', json)); }

  /**
   * PUT /v1/node (admin): true drains the node (creates get 503
   * backend_unavailable, reason draining; each sandbox is archived and
   * removed at its next idle point), false ends it.
   */
  setDraining(on) { return this._t.call(jsonCall('PUT', '/v1/node', json, { draining: !!on })); }

  /** GET /v1/metrics: the Prometheus text (auditor). */
  metrics() { return this._t.call(jsonCall('GET', '/v1/metrics', (r) => r.body.toString('utf8'))); }

  /** for await (const [event, data] of client.events()): GET /v1/events
   * (auditor), sandbox (created, removed) and command (started, exited)
   * as they happen.  Not resumed: a reader that fell behind gets
   * 'dropped' and the iteration ends, as it does when the daemon drains;
   * idleTimeoutMs bounds a silence (null: none). */
  async *events({ idleTimeoutMs = null } = {}) {
    const s = await this._t.open(jsonCall('GET', '/v1/events', () => null, undefined,
      { headers: { Accept: 'text/event-stream' } }), {}, idleTimeoutMs);
    const parser = new SSEParser();
    try {
      for await (const chunk of s.chunks()) {
        for (const e of parser.feed(chunk)) {
          let d = e.data;
          try { d = JSON.parse(e.data); } catch { /* kept as text */ }
          yield [e.event, d];
        }
      }
    } finally {
      // leaving the loop early closes the connection at once
      s.close();
    }
  }

  /** The health, read as a list of problems with what to do. */
  async doctor() {
    try { return doctorOf(await this.health(), null); } catch (e) {
      if (e instanceof SluiceError) return doctorOf(null, e);
      throw e;
    }
  }
}

export class Sandboxes {
  constructor(c) { this._c = c; }

  /**
   * Create a sandbox (and its broker session) for one chat.  Never
   * retried: a timeout cannot create two.
   */
  async create({ tenantId, userId, id = null, network = null, profile = null,
    limits = null, backend = null } = {}) {
    const b = { id: checkId('sandbox id', id || newId()), tenant: tenantId ?? '', user: userId ?? '' };
    // no network: the daemon's default tier (the administrator's) applies
    if (network != null) b.network = { tier: network };
    if (profile != null) b.profile = profile;
    if (backend != null) b.backend = backend;
    if (limits != null) b.limits = M.limitsToJson(limits);
    const info = await this._c._t.call(jsonCall('POST', '/v1/sandboxes', (r) => M.sandboxInfo(json(r)), b,
      { timeoutMs: this._c._createTimeoutMs }));
    return new Sandbox(this._c, info);
  }

  async get(id) {
    return new Sandbox(this._c, await this._c._t.call(jsonCall('GET', `/v1/sandboxes/${q(id)}`,
      (r) => M.sandboxInfo(json(r)), undefined, { sandbox: true })));
  }

  async list({ tenant = null, user = null } = {}) {
    const l = await this._c._t.call(jsonCall('GET', `/v1/sandboxes${query({ tenant, user })}`,
      (r) => (json(r).sandboxes || []).map(M.sandboxInfo)));
    return l.map((i) => new Sandbox(this._c, i));
  }

  /**
   * Clear `id` by its id alone: its archive is removed (a sandbox removed
   * by age leaves only that), and a sandbox still there is destroyed
   * without one.  Resolves to {id, deleted (whether a sandbox was
   * destroyed), archive: 'discarded'}; SandboxNotFoundError when there is
   * neither.
   */
  async discardArchive(id) {
    return this._c._t.call(jsonCall('DELETE', `/v1/sandboxes/${q(checkId('sandbox id', id))}${query({ archive: 'discard' })}`,
      json, undefined, { sandbox: true, timeoutMs: 120000 }));
  }
}

/** One chat's sandbox: commands, packages and files in /workspace. */
export class Sandbox {
  // session: the broker's session of the sandbox (prompts, grants); ids are per tenant, sluiced's session ids unique
  constructor(c, info) { this._c = c; this._t = c._t; this.id = info.id; this.session = info.session; this.lastInfo = info; }

  _call(method, path, parse, body, extra = {}) {
    return this._t.call(jsonCall(method, `/v1/sandboxes/${q(this.id)}${path}`, parse, body,
      { sandbox: true, ...extra }));
  }

  _waitMs(timeoutS) {
    return ((timeoutS || this.lastInfo.limits.timeoutS || EXEC_MAX_S) + MARGIN_S) * 1000;
  }

  async info() {
    this.lastInfo = await this._call('GET', '', (r) => M.sandboxInfo(json(r)));
    return this.lastInfo;
  }

  /** Change the network tier (the broker session follows). */
  async setNetwork(tier) {
    this.lastInfo = await this._call('PATCH', '', (r) => M.sandboxInfo(json(r)), { network: { tier } });
    return this.lastInfo;
  }

  /** Run cmd and resolve with how it ended and its output (BusyError
   * while another foreground command runs). */
  exec(cmd, opts = {}) {
    return this._call('POST', '/exec', (r) => M.execResult(json(r)), commandBody(cmd, opts),
      { timeoutMs: this._waitMs(opts.timeoutS) });
  }

  /** for await (const item of sb.stream(cmd)): chunks as they come, then
   * the ExecResult (with all the output). */
  async *stream(cmd, opts = {}) {
    const call = jsonCall('POST', `/v1/sandboxes/${q(this.id)}/exec`, () => null,
      commandBody(cmd, { ...opts, outputCap: undefined, outputCapTotal: undefined }),
      { sandbox: true, headers: { Accept: 'text/event-stream' } });
    const s = await this._t.open(call, {}, this._waitMs(opts.timeoutS));
    const parser = new SSEParser();
    const out = { stdout: [], stderr: [] };
    try {
      for await (const data of s.chunks()) {
        for (const e of parser.feed(data)) {
          let d = {};
          try { d = e.data ? JSON.parse(e.data) : {}; } catch { /* not an event of ours */ }
          if (e.event === 'stdout' || e.event === 'stderr') {
            const v = typeof d.data === 'string' ? d.data : '';
            const raw = opts.binary ? Buffer.from(v, 'base64') : Buffer.from(v, 'utf8');
            out[e.event].push(raw);
            yield { stream: e.event, data: raw.toString('utf8'), dataRaw: raw };
          } else if (e.event === 'exit') {
            yield M.execResult(d, Buffer.concat(out.stdout), Buffer.concat(out.stderr));
            return;
          }
        }
      }
    } finally {
      s.close();
    }
    throw new SluiceConnectionError('sluice-execd: the stream of a command ended before its exit event',
      { code: 'connection_failed' });
  }

  /** Start cmd in the background; it has a deadline only with timeoutS. */
  async start(cmd, opts = {}) {
    const d = await this._call('POST', '/commands', json, commandBody(cmd, { ...opts, binary: false }));
    return new Command(this, String(d.id), String(d.status));
  }

  commands() {
    return this._call('GET', '/commands', (r) => {
      const d = json(r);
      return (Array.isArray(d) ? d : d.commands || []).map(M.commandStatus);
    });
  }

  async command(id) {
    const st = await this._call('GET', `/commands/${q(id)}`, (r) => M.commandStatus(json(r)));
    const c = new Command(this, st.id, st.status);
    c.last = st;
    return c;
  }

  /** Install packages with pip (the sandbox user's site) or npm
   * (node_modules in /workspace), through the broker (POST /install: the
   * executor runs the manager; NetworkNotPermittedError when the
   * effective tier is off, BadRequestError for a name that is not one). */
  async install(packages, { manager = 'pip', timeoutS = null, check = true } = {}) {
    const r = await this._call('POST', '/install', (res) => M.execResult(json(res)),
      installBody(packages, manager, timeoutS), { timeoutMs: this._waitMs(timeoutS) });
    if (check && !r.ok) {
      const tail = (r.stderr || r.stdout).trim().split('\n').slice(-3).join(' / ');
      throw new CommandError(`${manager} install failed (exit ${r.exitCode}): ${tail}`, r);
    }
    return r;
  }

  /** Kill the foreground command's tree (and with all every background
   * command's); resolves with how many were cancelled. */
  cancel({ all = false } = {}) {
    return this._call('POST', '/cancel', (r) => json(r).cancelled || 0, { all }, { timeoutMs: 120000 });
  }

  async destroy({ archive = true } = {}) {
    await this._call('DELETE', query({ archive: archive ? 'keep' : 'discard' }), json, undefined,
      { timeoutMs: 120000 });
  }

  /** Write a file (parents made); resolves with its size. */
  async write(path, data) {
    const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    const d = await this._t.call({ method: 'PUT', path: `/v1/sandboxes/${q(this.id)}/files/${filePath(path)}`,
      parse: json, body, ctype: 'application/octet-stream', headers: {}, sandbox: true, timeoutMs: 300000 });
    return d.size || 0;
  }

  /** A regular file's bytes (a Buffer), or length of them from offset. */
  read(path, { offset = null, length = null } = {}) {
    const headers = { Accept: 'application/octet-stream' };
    if (offset != null || length != null) {
      const start = offset || 0;
      if (length != null && length <= 0) throw new InvalidArgumentError('length: above 0');
      headers.Range = length == null ? `bytes=${start}-` : `bytes=${start}-${start + length - 1}`;
    }
    return this._t.call({ method: 'GET', path: `/v1/sandboxes/${q(this.id)}/files/${filePath(path)}`,
      parse: (r) => r.body, body: null, ctype: null, headers, sandbox: true, timeoutMs: 300000 });
  }

  async readText(path) { return (await this.read(path)).toString('utf8'); }

  /** Entries of path (default /workspace) whose name (or path below it,
   * when glob has a slash) matches glob. */
  list({ glob = '*', recursive = false, path = null } = {}) {
    const g = glob === '*' && !recursive ? null : glob;
    return this._call('GET', `/files${query({ path, glob: g, recursive: recursive ? 1 : null })}`,
      (r) => M.listing(json(r)));
  }

  /** Replace the one occurrence of old (ConflictError when missing or not unique). */
  async edit(path, old, nu) { await this._call('POST', '/edit', json, { path, old, new: nu }); }

  async remove(path) { await this._call('DELETE', `/files/${filePath(path)}`, json); }

  /** Extract a tar (a Buffer or Uint8Array of a tar, tar.gz or tar.zst, or
   * the path of such a file) under dir of the workspace (made if missing),
   * in one call.  All or nothing: a refused entry (absolute, "..", a
   * device, through a link, a hard link outside) is a BadRequestError
   * naming it, and nothing is written.  Resolves with the counts. */
  async putTar(data, { dir = '.' } = {}) {
    let body;
    if (typeof data === 'string') {
      const { readFileSync, statSync } = await import('node:fs');
      if (statSync(data).isDirectory()) {
        throw new InvalidArgumentError('putTar: a tar (bytes or a file), not a directory: make one with tar -cf');
      }
      body = readFileSync(data);
    } else if (data instanceof Uint8Array) {
      body = Buffer.from(data);
    } else {
      throw new InvalidArgumentError('putTar: a Buffer, a Uint8Array or the path of a tar file');
    }
    return this._t.call({ method: 'PUT', path: `/v1/sandboxes/${q(this.id)}/archive${query({ path: tarDir(dir) })}`,
      parse: (r) => M.tarResult(json(r)), body, ctype: 'application/x-tar', headers: {}, sandbox: true,
      timeoutMs: 600000 });
  }

  /** A shell on a pty in the sandbox (bash -i, or bash -c command), as
   * the sandbox user; attached unless attach is false.  See Terminal. */
  async terminal({ command = null, cols = null, rows = null, cwd = null, env = null, attach = true } = {}) {
    const t = await terminalStart(this, { command, cols, rows, cwd, env });
    return attach ? t.attach() : t;
  }

  /** A terminal started earlier (its session id), not attached. */
  terminalOf(id) { return terminalGet(this, id); }

  /** The URL of port inside the sandbox through the executor's port
   * proxy; it takes the executor's token, as every call does. */
  portUrl(port, path = '/') { return addressString(this._t.address) + portPath(this.id, port, path); }

  /** An HTTP request to the server on 127.0.0.1:port inside the sandbox,
   * through the executor: its answer whatever its status (a
   * PortResponse); sluice's own errors (nothing listening: bad_gateway)
   * throw. */
  fetch(port, opts = {}) { return portFetch(this._t, this.id, port, opts); }

  /** dir of the workspace as a tar (a Buffer): files, directories and
   * symbolic links (as links). */
  getTar({ dir = '.' } = {}) {
    return this._t.call({ method: 'GET', path: `/v1/sandboxes/${q(this.id)}/archive${query({ path: tarDir(dir) })}`,
      parse: (r) => r.body, body: null, ctype: null, headers: { Accept: 'application/x-tar' }, sandbox: true,
      timeoutMs: 600000 });
  }
}

function tarDir(d) {
  if (typeof d !== 'string' || d.includes('\0')) throw new InvalidArgumentError('dir: a string');
  return d;
}

/** A background command. */
export class Command {
  constructor(sandbox, id, status) {
    this.sandbox = sandbox; this.id = id; this.status = status; this.last = null; this._next = [0, 0];
  }

  _seen(st) { this.last = st; this.status = st.status; return st; }

  async refresh() {
    return this._seen(await this.sandbox._call('GET', `/commands/${q(this.id)}`, (r) => M.commandStatus(json(r))));
  }

  /** Output from offset (both streams; by default where the last call
   * ended, so successive calls return what is new). */
  async output({ offset = null, stdoutOffset = null, stderrOffset = null, binary = false } = {}) {
    const so = stdoutOffset ?? offset ?? this._next[0];
    const se = stderrOffset ?? offset ?? this._next[1];
    const o = await this.sandbox._call('GET', `/commands/${q(this.id)}/output${query({
      stdout_offset: so, stderr_offset: se, encoding: binary ? 'base64' : null })}`,
    (r) => M.commandOutput(json(r), binary));
    this._next = [o.stdout.next, o.stderr.next];
    this._seen(o.status);
    return o;
  }

  /** Until the command has exited; rejects with a SluiceTimeoutError
   * (named TimeoutError) after timeoutMs (the command goes on). */
  async wait({ timeoutMs = null, pollMs = 200 } = {}) {
    const end = timeoutMs == null ? null : Date.now() + timeoutMs;
    let delay = Math.min(50, pollMs);
    for (;;) {
      const st = await this.refresh();
      if (st.status !== 'running') return st;
      if (end != null && Date.now() + delay > end) {
        throw new SluiceTimeoutError(`command ${this.id} still running after ${timeoutMs} ms`);
      }
      await sleep(delay);
      delay = Math.min(delay * 2, pollMs);
    }
  }

  /** Kill the command and everything it started. */
  async stop() { await this.sandbox._call('POST', `/commands/${q(this.id)}/stop`, json, undefined, { timeoutMs: 120000 }); }
}
