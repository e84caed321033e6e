// Typed answers of the executor and of the broker, in camelCase; each
// keeps the API's JSON in `raw`.
import { InvalidStateError } from './errors.js';

const int = (v) => (Number.isInteger(v) ? v : null);
const str = (v) => (typeof v === 'string' ? v : null);
const obj = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});
const arr = (v) => (Array.isArray(v) ? v : []);

const LIMIT_KEYS = ['memory_mb', 'pids', 'cpu_pct', 'tmp_mb', 'home_mb', 'fsize_mb',
  'nofile', 'nproc', 'timeout_s', 'output_cap'];
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

export function limitsFromJson(d) {
  const o = {};
  for (const k of LIMIT_KEYS) if (int(obj(d)[k]) != null) o[camel(k)] = d[k];
  return o;
}

/** { memoryMb: 256 } or { memory_mb: 256 } -> the API's keys. */
export function limitsToJson(l) {
  const o = {};
  for (const k of LIMIT_KEYS) {
    const v = l[camel(k)] ?? l[k];
    if (v != null) o[k] = v;
  }
  return o;
}

export function sandboxInfo(d) {
  const net = obj(d.network);
  return {
    id: str(d.id) || '', tenant: str(d.tenant) || '', user: str(d.user) || '',
    state: str(d.state) || '', backend: str(d.backend) || '', profile: str(d.profile) || '', image: str(d.image) || '',
    tier: str(net.tier) || '', broker: str(net.broker) || '', session: str(net.session) || str(d.id) || '',
    limits: limitsFromJson(d.limits), usage: obj(d.usage),
    created: str(d.created) || '', lastUsed: str(d.last_used) || '', note: str(d.note) || '',
    raw: d,
  };
}

function outOf(d, k, given) {
  if (given != null) return [given.toString('utf8'), given];
  const v = d[k];
  if (typeof v !== 'string') return ['', Buffer.alloc(0)];
  if (d.encoding === 'base64') {
    const b = Buffer.from(v, 'base64');
    return [b.toString('utf8'), b];
  }
  return [v, Buffer.from(v, 'utf8')];
}

/** What a command did to the workspace (its result, or its status once
 * it has exited): changed, changedTruncated, artifacts, artifactsSkipped. */
export function changes(d) {
  const objs = (v) => arr(v).filter((x) => x && typeof x === 'object');
  return {
    changed: objs(d.changed).map((c) => ({ path: str(c.path) || '', change: str(c.change) || '',
      type: str(c.type) || '', size: int(c.size) || 0 })),
    changedTruncated: d.changed_truncated === true,
    artifacts: objs(d.artifacts).map((a) => ({ path: str(a.path) || '', size: int(a.size) || 0,
      sha256: str(a.sha256) || '' })),
    artifactsSkipped: objs(d.artifacts_skipped).map((a) => ({ path: str(a.path) || '',
      size: int(a.size) || 0, limit: str(a.limit) || '' })),
  };
}

export function execResult(d, stdout = null, stderr = null) {
  const [so, soRaw] = outOf(d, 'stdout', stdout);
  const [se, seRaw] = outOf(d, 'stderr', stderr);
  const r = {
    id: str(d.id) || '', exitCode: int(d.exit_code) ?? -1, signal: int(d.signal),
    timedOut: d.timed_out === true, oomKilled: d.oom_killed === true,
    cancelled: d.cancelled === true, durationMs: int(d.duration_ms) || 0,
    stdout: so, stderr: se, stdoutRaw: soRaw, stderrRaw: seRaw,
    stdoutTruncated: d.stdout_truncated === true, stderrTruncated: d.stderr_truncated === true,
    outputDropped: int(d.output_dropped),
    ...changes(d),
    raw: d,
  };
  r.ok = r.exitCode === 0 && !r.timedOut && !r.cancelled && !r.oomKilled;
  return r;
}

export function commandStatus(d) {
  return {
    id: str(d.id) || '', status: str(d.status) || '', background: d.background === true,
    argv: arr(d.argv).filter((a) => typeof a === 'string'),
    started: str(d.started), ended: str(d.ended), exitCode: int(d.exit_code), signal: int(d.signal),
    timedOut: d.timed_out === true, cancelled: d.cancelled === true, oomKilled: d.oom_killed === true,
    stdoutBytes: int(d.stdout_bytes) || 0, stderrBytes: int(d.stderr_bytes) || 0,
    ...changes(d),
    raw: d,
  };
}

export function outputChunk(d, binary) {
  const o = obj(d);
  const v = typeof o.data === 'string' ? o.data : '';
  const raw = binary ? Buffer.from(v, 'base64') : Buffer.from(v, 'utf8');
  return { offset: int(o.offset) || 0, next: int(o.next) || 0,
    data: binary ? raw.toString('utf8') : v, dataRaw: raw };
}

export function commandOutput(d, binary) {
  return { status: commandStatus(d), stdout: outputChunk(d.stdout, binary),
    stderr: outputChunk(d.stderr, binary) };
}

export function fileEntry(d) {
  return { path: str(d.path) || '', type: str(d.type) || '', size: int(d.size) || 0,
    mode: str(d.mode) || '', mtime: int(d.mtime) || 0, target: str(d.target) };
}

/** An array of entries with `path` (the directory) and `truncated`. */
export function tarResult(d) {
  return { path: str(d.path) || '', files: int(d.files) || 0, dirs: int(d.dirs) || 0,
    links: int(d.links) || 0, bytes: int(d.bytes) || 0 };
}

export function listing(d) {
  const l = arr(d.entries).filter((e) => e && typeof e === 'object').map(fileEntry);
  l.path = str(d.path) || '';
  l.truncated = d.truncated === true;
  return l;
}

export function health(d) {
  return { ok: d.ok === true, version: str(d.version) || '',
    defaultBackend: str(d.default_backend) || '', backends: arr(d.backends),
    broker: obj(d.broker), capacity: obj(d.capacity), raw: d };
}

export function grant(d) {
  return { host: str(d.host) || '', port: int(d.port) || 0 };
}

export function brokerSession(d) {
  return {
    id: str(d.id) || '', tenant: str(d.tenant) || '', user: str(d.user) || '',
    tier: str(d.tier) || '', ceiling: str(d.ceiling) || '', effectiveTier: str(d.effective_tier) || '',
    transport: str(d.transport) || '', socket: str(d.socket), fromConfig: d.from_config === true,
    connections: int(d.connections) || 0, grants: arr(d.grants).map(grant),
    counters: obj(d.counters), raw: d,
  };
}

const strs = (v) => arr(v).filter((x) => typeof x === 'string');

/** A request rule of sluiced; tenant null: every tenant's sessions. */
export function rule(d) {
  return { name: str(d.name) || '', tenant: str(d.tenant), hosts: strs(d.hosts),
    methods: strs(d.methods), paths: strs(d.paths), action: str(d.action) || '' };
}

/** GET /v1/rules: the API's rules, the configuration's, the built-in names. */
export function ruleList(d) {
  return { rules: arr(d.rules).filter((r) => r && typeof r === 'object').map(rule),
    config: arr(d.config).filter((r) => r && typeof r === 'object').map(rule),
    builtin: strs(d.builtin) };
}

/** A credential, never its value (write-only). */
export function credential(d) {
  const inj = obj(d.inject);
  return { name: str(d.name) || '', tenant: str(d.tenant) || '', hosts: strs(d.hosts),
    header: str(inj.header) || '', format: str(inj.format) || '', methods: strs(d.methods),
    paths: strs(d.paths), placeholder: str(d.placeholder) || '', updated: int(d.updated), raw: d };
}

export function ceiling(d) {
  const t = {};
  for (const [k, v] of Object.entries(obj(d.tenants))) if (typeof v === 'string') t[k] = v;
  return { tier: str(d.tier) || '', tenants: t, source: str(d.source) || '',
    closed: int(d.closed), raw: d };
}

/** A pending network prompt; answer it with allowOnce(), allowChat() or deny(). */
export class Prompt {
  constructor(d, answer) {
    Object.defineProperty(this, '_answer', { value: answer, enumerable: false });
    this.id = str(d.id) || '';
    this.session = str(d.session) || '';
    this.tenant = str(d.tenant) || '';
    this.user = str(d.user) || '';
    this.host = str(d.host) || '';
    this.port = int(d.port) || 0;
    this.method = str(d.method) || '';
    this.path = str(d.path);
    this.tier = str(d.tier) || '';
    this.ceiling = str(d.ceiling) || '';
    this.created = str(d.created) || '';
    this.expires = str(d.expires) || '';
    this.expiresInS = int(d.expires_in_s) || 0;
    this.waiting = int(d.waiting) || 0;
    this.state = str(d.state) || '';
    this.raw = d;
  }

  /** host:port, IPv6 in brackets */
  get target() { return `${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`; }

  /** @param {'allow_once'|'allow_chat'|'deny'} decision */
  async answer(decision) {
    if (!this._answer) throw new InvalidStateError('this prompt was not read through a client');
    const n = await this._answer(this.id, decision);
    this.state = n.state;
    return n;
  }

  allowOnce() { return this.answer('allow_once'); }

  allowChat() { return this.answer('allow_chat'); }

  deny() { return this.answer('deny'); }
}
