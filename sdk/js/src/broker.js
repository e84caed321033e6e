// sluiced(8)'s control API: sessions, grants, ceilings, prompts, events,
// request rules and credentials.
import { Transport, SSEParser, jsonCall, q, addressString } from './http.js';
import { InvalidArgumentError, SluiceError } from './errors.js';
import * as M from './models.js';

export const DEFAULT_BROKER_ADDRESS = '/run/sluice/control.sock';
const json = (r) => (r.body.length ? JSON.parse(r.body.toString('utf8')) : null);
const arr = (v) => (Array.isArray(v) ? v : []);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** An answer that a reconnect will not change. */
const fatal = (e) => e.status != null && ![502, 503, 504].includes(e.status);

/**
 * sluiced's event stream (GET /v1/events) as an async iterator of
 * {id, type, data}, resumed after a dropped connection with Last-Event-ID
 * (sluiced replays what it still keeps).  `reconnects` bounds the
 * reconnections in a row (null: none); `idleTimeoutMs` is how long a
 * silent connection (no event, no ping) is trusted; with `markers`, an
 * event of type "connected" (id null) follows each (re)connection.
 */
export class EventStream {
  constructor(t, { lastEventId = null, reconnect = true, reconnects = null, idleTimeoutMs = 60000,
    markers = false } = {}) {
    this._t = t;
    this.lastEventId = lastEventId;
    this._reconnect = reconnect;
    this._max = reconnects;
    this._idle = idleTimeoutMs;
    this._markers = markers;
    this._stream = null;
    this._pre = null;
    this._closed = false;
    this.connects = 0;
    this._it = this._run();
  }

  async _open() {
    const extra = this.lastEventId != null ? { 'Last-Event-ID': String(this.lastEventId) } : {};
    const s = await this._t.open({ method: 'GET', path: '/v1/events', parse: () => null,
      body: null, ctype: null, headers: { Accept: 'text/event-stream' }, sandbox: false }, extra, this._idle);
    this.connects++;
    return s;
  }

  /** Open the stream now rather than at the first next(): from here on
   * the client counts as an approver. */
  async connect() {
    if (!this._stream && !this._pre && !this._closed) this._pre = await this._open();
    return this;
  }

  [Symbol.asyncIterator]() { return this; }

  next() { return this._it.next(); }

  return() { this.close(); return this._it.return(); }

  /** Stop: the iteration ends. */
  close() {
    this._closed = true;
    if (this._stream) this._stream.close();
    if (this._pre) this._pre.close();
  }

  async *_run() {
    let fails = 0;
    let delay = 100;
    while (!this._closed) {
      try {
        if (this._pre) { this._stream = this._pre; this._pre = null; } else this._stream = await this._open();
        if (this._closed) { this._stream.close(); return; }
        fails = 0; delay = 100;
        if (this._markers) yield { id: null, type: 'connected', data: { connects: this.connects } };
        const parser = new SSEParser();
        for await (const chunk of this._stream.chunks()) {
          for (const e of parser.feed(chunk)) {
            let d = {};
            try { d = e.data ? JSON.parse(e.data) : {}; } catch { /* kept as {} */ }
            const id = e.id != null && /^[0-9]+$/.test(e.id) ? Number(e.id) : null;
            if (id != null) this.lastEventId = id;
            yield { id, type: e.event, data: d };
          }
        }
      } catch (e) {
        if (this._closed) return;
        if (!(e instanceof SluiceError) || fatal(e) || !this._reconnect) throw e;
        fails++;
        if (this._max != null && fails > this._max) throw e;
      } finally {
        if (this._stream) { this._stream.close(); this._stream = null; }
      }
      if (this._closed || !this._reconnect) return;
      await sleep(delay * (0.5 + Math.random()));
      delay = Math.min(delay * 2, 5000);
    }
  }
}

/**
 * for await (const prompt of broker.prompts.watch()): the prompts of the
 * chats as they are raised.  A connected watch counts as an approver.
 * With `pending` the prompts already waiting come first, and again after
 * each reconnect; none is yielded twice.  `session` keeps one chat's.
 */
export class PromptWatch {
  constructor(b, { pending = true, session = null, lastEventId = null, reconnects = null,
    idleTimeoutMs = 60000 } = {}) {
    this._b = b;
    this._pending = pending;
    this._session = session;
    this._seen = new Set();
    this.events = new EventStream(b._t, { lastEventId, reconnects, idleTimeoutMs, markers: true });
    this._it = this._run();
  }

  _want(p) {
    if ((this._session != null && p.session !== this._session) || p.state !== 'pending') return false;
    if (this._seen.has(p.id)) return false;
    this._seen.add(p.id);
    if (this._seen.size > 4096) this._seen.delete(this._seen.values().next().value);
    return true;
  }

  async *_run() {
    for await (const e of this.events) {
      if (e.type === 'connected' && e.id == null) {
        if (this._pending) for (const p of await this._b.prompts.list()) if (this._want(p)) yield p;
      } else if (e.type === 'prompt' && e.data && typeof e.data === 'object') {
        const p = new M.Prompt(e.data, this._b._answer);
        if (this._want(p)) yield p;
      }
    }
  }

  [Symbol.asyncIterator]() { return this; }

  next() { return this._it.next(); }

  return() { this.close(); return this._it.return(); }

  /** Open the stream now: from here on the app is an approver (a prompt
   * raised with none is refused at once), so start what may ask after. */
  async connect() { await this.events.connect(); return this; }

  close() { this.events.close(); }
}

class Sessions {
  constructor(b) { this._t = b._t; }

  list() { return this._t.call(jsonCall('GET', '/v1/sessions', (r) => (json(r).sessions || []).map(M.brokerSession))); }

  get(id) { return this._t.call(jsonCall('GET', `/v1/sessions/${q(id)}`, (r) => M.brokerSession(json(r)))); }

  /** A session (a chat) with its transport: by default a socket of its own. */
  create({ id, tenant = '', user = '', tier = 'off', socket = null, source = null, vsockCid = null }) {
    if (typeof id !== 'string' || !ID.test(id)) throw new InvalidArgumentError(`session id ${JSON.stringify(id)}: 1 to 64 of A-Z a-z 0-9 . _ -`);
    const b = { id, tenant, user, tier };
    if (socket != null) b.socket = socket;
    if (source != null) b.source = source;
    if (vsockCid != null) b.vsock_cid = vsockCid;
    return this._t.call(jsonCall('POST', '/v1/sessions', (r) => M.brokerSession(json(r)), b));
  }

  setTier(id, tier) { return this._t.call(jsonCall('PATCH', `/v1/sessions/${q(id)}`, (r) => M.brokerSession(json(r)), { tier })); }

  async delete(id) { await this._t.call(jsonCall('DELETE', `/v1/sessions/${q(id)}`, json)); }
}

class Grants {
  constructor(b) { this._t = b._t; this._b = b; }

  async list(session) { return (await this._b.sessions.get(session)).grants; }

  /** Let the chat reach host:port (as far as its ceiling admits). */
  add(session, host, port) {
    return this._t.call(jsonCall('POST', `/v1/sessions/${q(session)}/grants`, (r) => M.grant(json(r)), { host, port }));
  }

  async remove(session, host, port) {
    const h = host.replace(/^\[|\]$/g, '');
    const target = h.includes(':') ? `[${h}]:${port}` : `${h}:${port}`;
    await this._t.call(jsonCall('DELETE', `/v1/sessions/${q(session)}/grants/${q(target)}`, json));
  }
}

class Ceilings {
  constructor(b) { this._t = b._t; }

  get() { return this._t.call(jsonCall('GET', '/v1/ceiling', (r) => M.ceiling(json(r)))); }

  /** Set the global ceiling and/or tenants' (null removes one); admin. */
  set({ tier = null, tenants = null, closeExceeding = false } = {}) {
    const b = {};
    if (tier != null) b.tier = tier;
    if (tenants != null) b.tenants = { ...tenants };
    if (!Object.keys(b).length) throw new InvalidArgumentError('set a tier, tenants or both');
    if (closeExceeding) b.close_exceeding = true;
    return this._t.call(jsonCall('PUT', '/v1/ceiling', (r) => M.ceiling(json(r)), b));
  }
}

const strList = (what, v) => {
  const l = typeof v === 'string' ? [v] : Array.from(v ?? []);
  if (!l.every((x) => typeof x === 'string')) throw new InvalidArgumentError(`${what}: a list of strings`);
  return l;
};

/** A rule as sluiced takes it (its own keys; sluiced names a field it refuses). */
const ruleBody = (r) => {
  if (!r || typeof r !== 'object' || Array.isArray(r)) throw new InvalidArgumentError('a rule: an object');
  const b = { ...r };
  for (const k of ['hosts', 'methods', 'paths']) if (b[k] != null) b[k] = strList(k, b[k]);
  return b;
};

class Rules {
  constructor(b) { this._t = b._t; }

  /** The API's rules in order, the configuration's and the built-in names (every role). */
  list() { return this._t.call(jsonCall('GET', '/v1/rules', (r) => M.ruleList(json(r)))); }

  get(name) { return this._t.call(jsonCall('GET', `/v1/rules/${q(name)}`, (r) => M.rule(json(r)))); }

  /** Append a rule after the API's others, or replace the one of its name where it stands (admin). */
  add(rule) { return this._t.call(jsonCall('POST', '/v1/rules', (r) => M.rule(json(r)), ruleBody(rule))); }

  /** The API's whole list, checked whole (admin); [] removes them all. */
  replace(rules) {
    if (!Array.isArray(rules)) throw new InvalidArgumentError('rules: an array of rules');
    return this._t.call(jsonCall('PUT', '/v1/rules', (r) => M.ruleList(json(r)), { rules: rules.map(ruleBody) }));
  }

  async delete(name) { await this._t.call(jsonCall('DELETE', `/v1/rules/${q(name)}`, json)); }
}

class Credentials {
  constructor(b) { this._t = b._t; }

  /** The credentials (a caller bound to a tenant: its own), never a value. */
  list() { return this._t.call(jsonCall('GET', '/v1/credentials', (r) => arr(json(r).credentials).map(M.credential))); }

  get(name) { return this._t.call(jsonCall('GET', `/v1/credentials/${q(name)}`, (r) => M.credential(json(r)))); }

  /** Set a credential, or rotate the one of its name (the placeholder
   * stays); the value is never sent back. */
  set({ name, tenant, hosts, value, header = 'Authorization', format = null, methods = null, paths = null }) {
    if (typeof value !== 'string') throw new InvalidArgumentError('value: a string');
    const inject = { header };
    if (format != null) inject.format = format;
    const b = { name, tenant, hosts: strList('hosts', hosts), inject, value };
    if (methods != null) b.methods = strList('methods', methods);
    if (paths != null) b.paths = strList('paths', paths);
    return this._t.call(jsonCall('POST', '/v1/credentials', (r) => M.credential(json(r)), b));
  }

  /** Revoke it: its placeholder is removed from then on. */
  async delete(name) { await this._t.call(jsonCall('DELETE', `/v1/credentials/${q(name)}`, json)); }
}

class Prompts {
  constructor(b) { this._b = b; this._t = b._t; }

  list() {
    return this._t.call(jsonCall('GET', '/v1/prompts',
      (r) => (json(r).prompts || []).map((p) => new M.Prompt(p, this._b._answer))));
  }

  get(id) { return this._t.call(jsonCall('GET', `/v1/prompts/${q(id)}`, (r) => new M.Prompt(json(r), this._b._answer))); }

  answer(id, decision) {
    if (!['allow_once', 'allow_chat', 'deny'].includes(decision)) {
      throw new InvalidArgumentError('decision: allow_once, allow_chat or deny');
    }
    return this._t.call(jsonCall('POST', `/v1/prompts/${q(id)}`, (r) => new M.Prompt(json(r), this._b._answer),
      { decision }));
  }

  watch(opts = {}) { return new PromptWatch(this._b, opts); }
}

/** sluiced's control API (role app or admin on its socket, or a token on
 * its https listener). */
export class BrokerClient {
  constructor(address = null, { token = null, ca = null, timeoutMs = 30000 } = {}) {
    const addr = address ?? process.env.SLUICE_BROKER_ADDRESS ?? DEFAULT_BROKER_ADDRESS;
    const tok = token ?? (addr.includes('://') ? process.env.SLUICE_BROKER_TOKEN || null : null);
    this._t = new Transport(addr, { token: tok, ca, timeoutMs, broker: true });
    this._answer = (id, decision) => this.prompts.answer(id, decision);
    this.sessions = new Sessions(this);
    this.grants = new Grants(this);
    this.ceilings = new Ceilings(this);
    this.prompts = new Prompts(this);
    this.rules = new Rules(this);
    this.credentials = new Credentials(this);
  }

  get address() { return addressString(this._t.address); }

  health() { return this._t.call(jsonCall('GET', '/v1/health', json)); }

  metrics() { return this._t.call(jsonCall('GET', '/v1/metrics', (r) => r.body.toString('utf8'))); }

  /** Every event; see EventStream. */
  events(opts = {}) { return new EventStream(this._t, opts); }
}
