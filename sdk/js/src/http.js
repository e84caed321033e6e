// HTTP/1.1 to the daemons: a Unix socket (node:http with socketPath) or
// https with a bearer token (node:https).  One connection per call, so no
// call reuses a connection the daemon may have closed: a GET whose
// connection drops before its answer is complete is retried once, nothing
// else is (a create or a command is never sent twice).
import http from 'node:http';
import https from 'node:https';
import { InvalidArgumentError, SluiceConnectionError, SluiceError, errorFrom } from './errors.js';

export const VERSION = '0.1.0';
const USER_AGENT = `sluice-js/${VERSION}`;
const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE']);

/** @param {string} address */
export function parseAddress(address) {
  if (address.startsWith('unix:')) {
    let p = address.slice(5);
    if (p.startsWith('//')) p = p.slice(2);
    return { unix: p };
  }
  if (!address.includes('://')) return { unix: address };
  const u = new URL(address);
  if (u.protocol !== 'https:') {
    throw new InvalidArgumentError(`${address}: a daemon's TCP listener is https only (or give a Unix socket path)`);
  }
  return {
    unix: null,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port ? Number(u.port) : 443,
    prefix: u.pathname.replace(/\/+$/, ''),
  };
}

export function addressString(a) {
  if (a.unix != null) return a.unix;
  const h = a.host.includes(':') ? `[${a.host}]` : a.host;
  return `https://${h}:${a.port}${a.prefix}`;
}

export const q = (s) => encodeURIComponent(s);

export function query(kv) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(kv)) if (v != null) p.append(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** A call: method, path, body (Buffer), headers, how to read the answer. */
export function jsonCall(method, path, parse, body, extra = {}) {
  return {
    method, path, parse,
    body: body === undefined ? null : Buffer.from(JSON.stringify(body), 'utf8'),
    ctype: body === undefined ? null : 'application/json',
    headers: {}, sandbox: false, timeoutMs: null, ...extra,
  };
}

/** Server-Sent Events from bytes as they come. */
export class SSEParser {
  constructor() { this.buf = ''; this.id = null; this.event = ''; this.data = []; this.lastId = null; }

  /** @param {Buffer|string} chunk @returns {{id: string|null, event: string, data: string}[]} */
  feed(chunk) {
    this.buf += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (this.buf.length > 16 << 20) throw new SluiceError('event stream: a line too long', { code: 'bad_answer' });
    const out = [];
    for (;;) {
      const i = this.buf.indexOf('\n');
      if (i < 0) return out;
      let line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (this.data.length || this.event) {
          if (this.id != null) this.lastId = this.id;
          out.push({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
        }
        this.id = null; this.event = ''; this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const name = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? '' : line.slice(c + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (name === 'data') this.data.push(value);
      else if (name === 'event') this.event = value;
      else if (name === 'id' && !value.includes('\0')) this.id = value;
    }
  }
}

export class Transport {
  /**
   * @param {string} address
   * @param {{token?: string|null, ca?: string|Buffer|null, timeoutMs?: number, broker?: boolean}} o
   */
  constructor(address, { token = null, ca = null, timeoutMs = 60000, broker = false } = {}) {
    this.address = parseAddress(address);
    if (token != null && this.address.unix != null) {
      throw new InvalidArgumentError('a token is for an https address; on a Unix socket the daemon takes your uid and groups');
    }
    this.token = token;
    this.ca = ca;
    this.timeoutMs = timeoutMs;
    this.broker = broker;
    this.name = broker ? 'sluiced' : 'sluice-execd';
  }

  fail(e) {
    return new SluiceConnectionError(`${this.name} at ${addressString(this.address)}: ${e && e.message ? e.message : e}`,
      { code: 'connection_failed' });
  }

  check(call, status, body) {
    if (status >= 400) throw errorFrom(status, body, { broker: this.broker, sandbox: call.sandbox });
  }

  _headers(call, extra) {
    const h = {
      Host: this.address.unix != null ? 'localhost' : this.address.host,
      'User-Agent': USER_AGENT, Accept: 'application/json', Connection: 'close',
    };
    if (this.token != null) h.Authorization = `Bearer ${this.token}`;
    if (call.ctype) h['Content-Type'] = call.ctype;
    if (call.body != null || ['POST', 'PUT', 'PATCH'].includes(call.method)) {
      h['Content-Length'] = String(call.body ? call.body.length : 0);
    }
    return { ...h, ...call.headers, ...extra };
  }

  /** Send call; resolves with {req, res} once the head of the answer came. */
  _send(call, timeoutMs, extra = {}) {
    const a = this.address;
    const opts = {
      method: call.method, path: (a.prefix || '') + call.path,
      headers: this._headers(call, extra), agent: false,
    };
    let mod = http;
    if (a.unix != null) opts.socketPath = a.unix;
    else {
      mod = https;
      Object.assign(opts, { host: a.host, port: a.port, servername: /^[0-9.:]+$/.test(a.host) ? undefined : a.host });
      if (this.ca != null) opts.ca = this.ca;
    }
    return new Promise((resolve, reject) => {
      const req = mod.request(opts, (res) => resolve({ req, res }));
      req.on('error', reject);
      if (timeoutMs) {
        req.setTimeout(timeoutMs, () => {
          const e = new Error(`no answer in ${timeoutMs} ms`);
          e.code = 'ETIMEDOUT';
          req.destroy(e);
        });
      }
      req.end(call.body || undefined);
    });
  }

  static _readAll(res) {
    return new Promise((resolve, reject) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        if (!res.complete) {
          const e = new Error('the answer was cut short');
          e.code = 'ECONNRESET';
          reject(e);
        } else resolve(Buffer.concat(parts));
      });
      res.on('error', reject);
      res.on('aborted', () => {
        const e = new Error('the answer was cut short');
        e.code = 'ECONNRESET';
        reject(e);
      });
    });
  }

  /** A call, its answer read whole and parsed. */
  async call(call) {
    const timeoutMs = call.timeoutMs != null ? call.timeoutMs : this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      let status;
      let headers;
      let body;
      try {
        const { res } = await this._send(call, timeoutMs);
        body = await Transport._readAll(res);
        status = res.statusCode;
        headers = res.headers;
      } catch (e) {
        if (e instanceof SluiceError) throw e;
        if (call.method === 'GET' && attempt === 0 && DROPPED.has(e.code)) continue;
        throw this.fail(e);
      }
      // the port proxy: what the server in the sandbox answered is its
      // answer, whatever its status, never an error of sluice's
      if (!(call.upstream && headers['x-sluice-upstream'] === '1')) this.check(call, status, body);
      return call.parse({ status, headers, body });
    }
  }

  /** Send call; a 2xx answer is a Stream of its body, an error throws. */
  async open(call, extra = {}, readTimeoutMs = null) {
    let req;
    let res;
    try {
      ({ req, res } = await this._send(call, readTimeoutMs, extra));
    } catch (e) {
      throw this.fail(e);
    }
    if (res.statusCode >= 400) {
      let body = Buffer.alloc(0);
      try { body = await Transport._readAll(res); } catch { /* the status says enough */ }
      this.check(call, res.statusCode, body);
    }
    return new Stream(this, req, res);
  }
}

/** The body of an answer as its chunks come; close() ends the connection. */
export class Stream {
  constructor(t, req, res) { this.t = t; this.req = req; this.res = res; this.closed = false; }

  async *chunks() {
    try {
      for await (const d of this.res) yield d;
      if (!this.res.complete && !this.closed) throw this.t.fail(new Error('the stream was cut short'));
    } catch (e) {
      if (this.closed) return;
      if (e instanceof SluiceError) throw e;
      throw this.t.fail(e);
    } finally {
      this.close();
    }
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.res.destroy();
    this.req.destroy();
  }
}
