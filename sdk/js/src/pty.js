// Terminals (a shell on a pty in a sandbox, over a WebSocket) and the
// port proxy's answers: sluice-execd(8)'s /v1/sandboxes/{id}/pty and
// /v1/sandboxes/{id}/ports/{port}.  The WebSocket is a small RFC 6455
// client here (masked frames; the server's fragments and control frames),
// on the same Unix socket or TLS connection as every call, through
// node:http's upgrade.  The protocol is OpenSandbox's: binary frames 0x01
// (output), 0x02 (the wrapper's stderr), 0x03 (a replay: 8-byte offset,
// then bytes); JSON text messages connected, exit, error; input as 0x00
// and bytes, resize and signal as JSON.
import http from 'node:http';
import https from 'node:https';
import { createHash, randomBytes } from 'node:crypto';
import { jsonCall, q, query } from './http.js';
import { InvalidArgumentError, SluiceConnectionError, SluiceError, SluiceTimeoutError, errorFrom } from './errors.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const MAX_FRAME = 16 << 20;
const json = (r) => (r.body.length ? JSON.parse(r.body.toString('utf8')) : null);

/** The answer of the server on a port inside the sandbox, as it sent it. */
export class PortResponse {
  constructor(status, headers, body) { this.status = status; this.headers = headers; this.body = body; }

  header(name) { const v = this.headers[name.toLowerCase()]; return v === undefined ? null : v; }

  text() { return this.body.toString('utf8'); }

  json() { return JSON.parse(this.text()); }
}

function terminalInfo(d) {
  return {
    sessionId: d.session_id, running: !!d.running, outputOffset: d.output_offset || 0,
    oldestOffset: d.oldest_offset || 0, attached: !!d.attached, cols: d.cols ?? null,
    rows: d.rows ?? null, exitCode: d.exit_code ?? null, raw: d,
  };
}

export function portPath(sid, port, path = '/') {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new InvalidArgumentError(`port ${port}: 1 to 65535`);
  }
  const p = path.startsWith('/') ? path : `/${path}`;
  return `/v1/sandboxes/${q(sid)}/ports/${port}${p}`;
}

/** The port proxy: one request to 127.0.0.1:port inside the sandbox. */
export function portFetch(t, sid, port, { path = '/', method = 'GET', body = null, headers = {}, timeoutMs = null } = {}) {
  const b = body == null ? null : Buffer.isBuffer(body) ? body : Buffer.from(String(body), 'utf8');
  return t.call({
    method: method.toUpperCase(), path: portPath(sid, port, path), body: b, ctype: null,
    headers: { ...headers }, sandbox: true, timeoutMs, upstream: true,
    parse: (r) => {
      const h = { ...r.headers };
      delete h['x-sluice-upstream'];
      return new PortResponse(r.status, h, r.body);
    },
  });
}

/**
 * A terminal of a sandbox (Sandbox.terminal()): attach() opens the
 * WebSocket; then send, resize, signal, read / readUntil; detach() leaves
 * the shell running (its output kept for attach({since})); kill() ends it.
 * offset: the next output byte's offset; exitCode once the shell ended.
 */
export class Terminal {
  constructor(sandbox, info) {
    this._sb = sandbox; this._t = sandbox._t; this.id = info.sessionId; this.sandboxId = sandbox.id;
    this.lastInfo = info; this.offset = info.outputOffset; this.exitCode = null; this.closeCode = null;
    this.errors = []; this._sock = null; this._buf = Buffer.alloc(0); this._out = []; this._waiters = [];
  }

  get attached() { return this._sock != null; }

  async info() {
    this.lastInfo = await this._t.call(jsonCall('GET', `/v1/sandboxes/${q(this.sandboxId)}/pty/${q(this.id)}`,
      (r) => terminalInfo(json(r)), undefined, { sandbox: true }));
    return this.lastInfo;
  }

  /** End the shell and everything it started. */
  async kill() {
    this.lastInfo = await this._t.call(jsonCall('DELETE', `/v1/sandboxes/${q(this.sandboxId)}/pty/${q(this.id)}`,
      (r) => terminalInfo(json(r)), undefined, { sandbox: true }));
    return this.lastInfo;
  }

  /** Open the WebSocket.  since: replay from that offset first;
   * takeover: close a client attached already (else ConflictError). */
  attach({ since = null, takeover = false, timeoutMs = 30000 } = {}) {
    const t = this._t;
    const a = t.address;
    const key = randomBytes(16).toString('base64');
    const headers = {
      Host: a.unix != null ? 'localhost' : a.host, 'User-Agent': 'sluice-js',
      Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13',
    };
    if (t.token != null) headers.Authorization = `Bearer ${t.token}`;
    const opts = {
      method: 'GET', agent: false, headers,
      path: `${a.prefix || ''}/v1/sandboxes/${q(this.sandboxId)}/pty/${q(this.id)}/ws${query({ since, takeover: takeover ? 1 : null })}`,
    };
    let mod = http;
    if (a.unix != null) opts.socketPath = a.unix;
    else {
      mod = https;
      Object.assign(opts, { host: a.host, port: a.port, servername: /^[0-9.:]+$/.test(a.host) ? undefined : a.host });
      if (t.ca != null) opts.ca = t.ca;
    }
    return new Promise((resolve, reject) => {
      const req = mod.request(opts);
      const timer = setTimeout(() => req.destroy(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
      req.on('error', (e) => { clearTimeout(timer); reject(t.fail(e)); });
      req.on('response', (res) => {
        const parts = [];
        res.on('data', (d) => parts.push(d));
        res.on('end', () => { clearTimeout(timer); reject(errorFrom(res.statusCode, Buffer.concat(parts), { sandbox: true })); });
      });
      req.on('upgrade', (res, sock, head) => {
        clearTimeout(timer);
        const want = createHash('sha1').update(key + GUID).digest('base64');
        if (res.headers['sec-websocket-accept'] !== want) {
          sock.destroy();
          reject(new SluiceError('terminal: a wrong Sec-WebSocket-Accept', { code: 'bad_answer' }));
          return;
        }
        this._sock = sock; this._buf = Buffer.from(head); this._out = []; this.closeCode = null;
        let connected = false;
        this._onConnected = () => { if (!connected) { connected = true; resolve(this); } };
        sock.on('data', (d) => { this._buf = Buffer.concat([this._buf, d]); this._frames(); });
        sock.on('close', () => { this._gone(); if (!connected) reject(new SluiceConnectionError('terminal: closed at once', { code: 'connection_failed' })); });
        sock.on('error', () => this._gone());
        this._frames();
      });
      req.end();
    });
  }

  _send(op, payload) {
    if (this._sock == null) throw new SluiceError(`terminal ${this.id} is not attached`, { code: 'not_attached' });
    const n = payload.length;
    let h;
    if (n < 126) h = Buffer.from([0x80 | op, 0x80 | n]);
    else if (n < 65536) { h = Buffer.alloc(4); h[0] = 0x80 | op; h[1] = 0x80 | 126; h.writeUInt16BE(n, 2); }
    else { h = Buffer.alloc(10); h[0] = 0x80 | op; h[1] = 0x80 | 127; h.writeBigUInt64BE(BigInt(n), 2); }
    const k = randomBytes(4);
    const m = Buffer.alloc(n);
    for (let i = 0; i < n; i++) m[i] = payload[i] ^ k[i & 3];
    this._sock.write(Buffer.concat([h, k, m]));
  }

  /** Keys for the shell (a string goes as UTF-8; '\x03' is Ctrl-C). */
  send(data) { this._send(2, Buffer.concat([Buffer.from([0]), Buffer.isBuffer(data) ? data : Buffer.from(String(data), 'utf8')])); }

  resize(cols, rows) { this._send(1, Buffer.from(JSON.stringify({ type: 'resize', cols, rows }))); }

  /** A signal to the terminal's foreground process group. */
  signal(sig = 'INT') { this._send(1, Buffer.from(JSON.stringify({ type: 'signal', signal: sig }))); }

  _frames() {
    for (;;) {
      const b = this._buf;
      if (b.length < 2) return;
      let n = b[1] & 0x7f;
      let hl = 2;
      if (n === 126) { if (b.length < 4) return; n = b.readUInt16BE(2); hl = 4; }
      else if (n === 127) { if (b.length < 10) return; n = Number(b.readBigUInt64BE(2)); hl = 10; }
      if (n > MAX_FRAME) { this._sock.destroy(); this._gone(); return; }
      if (b.length < hl + n) return;
      const op = b[0] & 0x0f;
      const p = b.subarray(hl, hl + n);
      this._buf = b.subarray(hl + n);
      if (op === 2 && p[0] === 0x01) { this._out.push(Buffer.from(p.subarray(1))); this.offset += n - 1; }
      else if (op === 2 && p[0] === 0x03 && n >= 9) this._out.push(Buffer.from(p.subarray(9)));
      else if (op === 2 && p[0] === 0x02) this._out.push(Buffer.from(p.subarray(1)));
      else if (op === 1) {
        let m = null;
        try { m = JSON.parse(p.toString('utf8')); } catch { /* not ours */ }
        if (m && m.type === 'connected') { this.offset = m.offset || 0; if (this._onConnected) this._onConnected(); }
        else if (m && m.type === 'exit') this.exitCode = m.exit_code;
        else if (m && m.type === 'error') this.errors.push(m);
      } else if (op === 9) this._send(10, p);
      else if (op === 8) {
        this.closeCode = n >= 2 ? p.readUInt16BE(0) : 1005;
        try { this._send(8, p.subarray(0, 2)); } catch { /* gone */ }
        this._sock.end();
        this._gone();
        return;
      }
      this._wake();
    }
  }

  _wake() { const w = this._waiters; this._waiters = []; for (const f of w) f(); }

  _gone() { if (this._sock) { this._sock.destroy(); this._sock = null; } this._wake(); }

  /** The output that came within timeoutMs (an empty Buffer: none). */
  async read({ timeoutMs = 1000 } = {}) {
    if (!this._out.length && this._sock != null) {
      await new Promise((r) => { const tm = setTimeout(r, timeoutMs); this._waiters.push(() => { clearTimeout(tm); r(); }); });
    }
    const out = Buffer.concat(this._out);
    this._out = [];
    return out;
  }

  /** Output up to and including pattern; SluiceTimeoutError when it does not come in timeoutMs. */
  async readUntil(pattern, { timeoutMs = 30000 } = {}) {
    const pat = Buffer.isBuffer(pattern) ? pattern : Buffer.from(String(pattern), 'utf8');
    let got = Buffer.alloc(0);
    const end = Date.now() + timeoutMs;
    while (got.indexOf(pat) < 0) {
      const left = end - Date.now();
      if (left <= 0 || (this._sock == null && !this._out.length)) {
        throw new SluiceTimeoutError(`terminal ${this.id}: ${JSON.stringify(pat.toString())} did not come (got ${JSON.stringify(got.subarray(-300).toString())})`);
      }
      got = Buffer.concat([got, await this.read({ timeoutMs: Math.min(left, 1000) })]);
    }
    const i = got.indexOf(pat) + pat.length;
    if (i < got.length) this._out.unshift(got.subarray(i));
    return got.subarray(0, i);
  }

  /** Close the WebSocket; the shell runs on. */
  async detach() {
    if (this._sock == null) return;
    const s = this._sock;
    try { this._send(8, Buffer.from([0x03, 0xe8])); } catch { /* gone */ }
    await new Promise((r) => {
      const tm = setTimeout(r, 5000);
      s.on('close', () => { clearTimeout(tm); r(); });
      if (s.destroyed) { clearTimeout(tm); r(); }
    });
    this._gone();
  }
}

export function terminalStart(sb, { command = null, cwd = null, env = null, cols = null, rows = null } = {}) {
  const b = {};
  if (command != null) b.command = command;
  if (cwd != null) b.cwd = cwd;
  if (env != null) b.env = { ...env };
  if (cols != null) b.cols = cols;
  if (rows != null) b.rows = rows;
  return sb._t.call(jsonCall('POST', `/v1/sandboxes/${q(sb.id)}/pty`, (r) => new Terminal(sb, terminalInfo(json(r))), b,
    { sandbox: true }));
}

export function terminalGet(sb, id) {
  return sb._t.call(jsonCall('GET', `/v1/sandboxes/${q(sb.id)}/pty/${q(id)}`, (r) => new Terminal(sb, terminalInfo(json(r))),
    undefined, { sandbox: true }));
}
