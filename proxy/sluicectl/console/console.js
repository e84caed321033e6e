/*
 * sluice console: the pages' script.  Plain DOM, no dependencies.
 *
 * Every string shown comes from sluiced or the executor and may come
 * from a sandbox: it goes into the page as text (textContent, text
 * nodes, attribute values through setAttribute), never as markup.
 * Calls go to this console's /api/ paths; sluicectl makes them on the
 * control sockets with its user's rights.
 */
'use strict';

(function () {
  const TIERS = ['off', 'registries', 'public'];
  const S = {
    me: null,            // /api/console
    role: null,          // admin, app, auditor (sluiced's health.caller)
    who: null,
    exec: false,         // the executor answers
    page: null,
    prompts: new Map(),  // id -> {doc, deadline, card}
    es: null,
    esRetry: null,
    reasons: new Map(),  // name -> hint
    sessionShown: null,  // id in the detail panel
    sandboxShown: null,
    logRecords: [],
    timers: {},
  };

  // ---- DOM helpers -------------------------------------------------

  const $ = (id) => document.getElementById(id);

  // el('td', {class: 'x'}, 'text', node, ...): text is always text
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'onclick') e.addEventListener('click', v);
      else if (k === 'onchange') e.addEventListener('change', v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      e.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function show(node, on) {
    node.hidden = !on;
  }

  function text(v) {
    if (v === null || v === undefined) return '–';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }

  function hostport(host, port) {
    const h = String(host);
    return (h.includes(':') ? '[' + h + ']' : h) + ':' + port;
  }

  function say(msg) {
    const s = $('status');
    s.textContent = msg;
    clearTimeout(S.timers.say);
    S.timers.say = setTimeout(() => { s.textContent = ''; }, 8000);
  }

  function banner(msg) {
    const b = $('banner');
    b.textContent = msg || '';
    show(b, !!msg);
  }

  function tierSelect(current, label) {
    const sel = el('select', { 'aria-label': label });
    for (const t of TIERS) {
      const o = el('option', { value: t, text: t });
      if (t === current) o.selected = true;
      sel.appendChild(o);
    }
    return sel;
  }

  // A button that asks once more before doing something that cannot be
  // undone: the first press arms it for five seconds.
  function dangerButton(label, armed, fn) {
    const b = el('button', { type: 'button', class: 'danger', text: label });
    let timer = null;
    b.addEventListener('click', async () => {
      if (!b.classList.contains('confirm')) {
        b.classList.add('confirm');
        b.textContent = armed;
        timer = setTimeout(() => { b.classList.remove('confirm'); b.textContent = label; }, 5000);
        return;
      }
      clearTimeout(timer);
      b.disabled = true;
      try { await fn(); } finally { b.disabled = false; b.classList.remove('confirm'); b.textContent = label; }
    });
    return b;
  }

  // A table is not redrawn under a choice being made in it: a tier being
  // picked, a Destroy pressed once and waiting for the second press.
  function busy(tb) {
    const a = document.activeElement;
    return !!a && tb.contains(a) && (a.tagName === 'SELECT' || a.classList.contains('confirm'));
  }

  function fieldList(dl, pairs) {
    clear(dl);
    for (const [k, v] of pairs) {
      dl.appendChild(el('dt', { text: k }));
      const dd = el('dd', { text: text(v) });
      if (v !== null && typeof v === 'object') dd.className = 'mono';
      dl.appendChild(dd);
    }
  }

  // ---- API ---------------------------------------------------------

  class ApiError extends Error {
    constructor(status, doc) {
      const e = doc && doc.error ? doc.error : null;
      super(e && e.message ? e.message : 'HTTP ' + status);
      this.status = status;
      this.code = e && e.code ? e.code : '';
    }
  }

  async function api(method, path, body) {
    const opt = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      opt.headers['Content-Type'] = 'application/json';
      opt.body = JSON.stringify(body);
    }
    const r = await fetch(path, opt);
    let doc = null;
    try { doc = await r.json(); } catch (e) { doc = null; }
    if (!r.ok) throw new ApiError(r.status, doc);
    return doc;
  }

  const sluiced = (m, p, b) => api(m, '/api/sluiced' + p, b);
  const executor = (m, p, b) => api(m, '/api/exec' + p, b);
  const seg = (s) => encodeURIComponent(String(s));

  const canWrite = () => S.role === 'admin' || S.role === 'app';

  // ---- pages -------------------------------------------------------

  const pages = {
    prompts: { enter: () => syncPrompts() },
    sessions: { enter: () => loadSessions(), every: 5000 },
    ceiling: { enter: () => loadCeiling() },
    rules: { enter: () => loadRules() },
    log: { enter: () => { loadLog(); verifyChain(); } },
    health: { enter: () => loadHealth(), every: 10000 },
  };

  function allowedPages() {
    return Object.keys(pages).filter((p) => document.querySelector('#nav li[data-page="' + p + '"]'));
  }

  function route() {
    const want = location.hash.replace(/^#/, '');
    const ok = allowedPages();
    const page = ok.includes(want) ? want : ok[0];
    if (S.page !== page) {
      S.page = page;
      for (const sec of document.querySelectorAll('section.page')) show(sec, sec.id === 'page-' + page);
      for (const a of document.querySelectorAll('#nav a')) {
        if (a.getAttribute('href') === '#' + page) a.setAttribute('aria-current', 'page');
        else a.removeAttribute('aria-current');
      }
      clearInterval(S.timers.page);
      const p = pages[page];
      if (p.every) S.timers.page = setInterval(() => p.enter(), p.every);
    }
    pages[page].enter();
  }

  // What a role may not use is not in the page at all.
  function removePage(name) {
    const li = document.querySelector('#nav li[data-page="' + name + '"]');
    if (li) li.remove();
    const sec = $('page-' + name);
    if (sec) sec.remove();
  }

  // ---- prompts -----------------------------------------------------

  function promptTitle(p) {
    return (p.method || '?') + ' ' + hostport(p.host, p.port);
  }

  function leftText(ms) {
    if (ms <= 0) return 'expired';
    const s = Math.ceil(ms / 1000);
    const m = Math.floor(s / 60);
    return (m > 0 ? m + ' min ' : '') + (s % 60) + ' s left';
  }

  function buildCard(id) {
    const card = el('article', { class: 'card', 'data-prompt-id': id, 'aria-labelledby': 'pt-' + id });
    card.appendChild(el('h2', { id: 'pt-' + id }));
    card.appendChild(el('p', { class: 'left', 'aria-label': 'time left' }));
    card.appendChild(el('dl', { class: 'fields' }));
    const actions = el('div', { class: 'actions', role: 'group', 'aria-label': 'Answer' });
    const answers = [['allow_once', 'Allow once', ''], ['allow_chat', 'Allow for this chat', 'primary'], ['deny', 'Deny', 'danger']];
    for (const [decision, label, cls] of answers) {
      actions.appendChild(el('button', {
        type: 'button', class: cls || null, 'data-answer': decision, text: label,
        onclick: () => answerPrompt(id, decision, card),
      }));
    }
    card.appendChild(actions);
    card.appendChild(el('p', { class: 'err', role: 'alert' }));
    return card;
  }

  function fillCard(it) {
    const p = it.doc;
    const card = it.card;
    card.querySelector('h2').textContent = promptTitle(p);
    const pairs = [
      ['Chat', p.session], ['Tenant', p.tenant], ['User', p.user], ['Method', p.method],
      ['Host', p.host], ['Port', p.port],
    ];
    if (p.path !== null && p.path !== undefined) pairs.push(['Path', p.path]);
    if (p.rule) pairs.push(['Rule', p.rule]);
    pairs.push(['Waiting requests', p.waiting], ['Tier / ceiling', text(p.tier) + ' / ' + text(p.ceiling)]);
    fieldList(card.querySelector('dl'), pairs);
    tickCard(it, Date.now());
  }

  function tickCard(it, now) {
    const left = it.deadline - now;
    const l = it.card.querySelector('.left');
    l.textContent = leftText(left);
    if (left < 10000) l.setAttribute('data-low', '');
    else l.removeAttribute('data-low');
    // sluiced answers an expired prompt itself (prompt_resolved); this
    // is for a stream that missed it
    if (left < -3000) removePrompt(it.doc.id);
  }

  function updateCount() {
    const n = S.prompts.size;
    const c = $('prompt-count');
    if (c) {
      c.textContent = String(n);
      c.setAttribute('aria-label', n + ' pending');
      show(c, n > 0);
    }
    const empty = $('prompts-empty');
    if (empty) show(empty, n === 0);
    document.title = (n > 0 ? '(' + n + ') ' : '') + 'sluice console';
  }

  function upsertPrompt(p) {
    if (!p || typeof p.id !== 'string') return;
    if (p.state && p.state !== 'pending') { removePrompt(p.id); return; }
    let it = S.prompts.get(p.id);
    const fresh = !it;
    if (fresh) {
      it = { doc: p, card: buildCard(p.id), deadline: 0 };
      S.prompts.set(p.id, it);
      const cards = $('cards');
      if (cards) cards.appendChild(it.card);
    }
    it.doc = p;
    it.deadline = Date.now() + Math.max(0, Number(p.expires_in_s) || 0) * 1000;
    fillCard(it);
    updateCount();
    if (fresh) say('New prompt: ' + promptTitle(p) + ' from chat ' + p.session);
  }

  function removePrompt(id, why) {
    const it = S.prompts.get(id);
    if (!it) return;
    S.prompts.delete(id);
    it.card.remove();
    updateCount();
    if (why && why.answer) say('Prompt ' + promptTitle(it.doc) + ' answered: ' + why.answer + (why.by ? ' by ' + why.by : ''));
  }

  async function answerPrompt(id, decision, card) {
    const buttons = card.querySelectorAll('button');
    const err = card.querySelector('.err');
    buttons.forEach((b) => { b.disabled = true; });
    err.textContent = '';
    try {
      const r = await sluiced('POST', '/v1/prompts/' + seg(id), { decision });
      removePrompt(id, { answer: r && r.state ? r.state : decision, by: 'you' });
    } catch (e) {
      if (e.status === 404 || e.status === 409) {
        removePrompt(id, { answer: 'already answered or expired' });
        return;
      }
      err.textContent = 'Not answered: ' + e.message;
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  async function syncPrompts() {
    if (!canWrite()) return;
    try {
      const doc = await sluiced('GET', '/v1/prompts');
      const list = Array.isArray(doc.prompts) ? doc.prompts : [];
      const ids = new Set(list.map((p) => p.id));
      for (const id of Array.from(S.prompts.keys())) if (!ids.has(id)) removePrompt(id);
      for (const p of list) upsertPrompt(p);
    } catch (e) {
      setLive('down', 'Cannot list prompts: ' + e.message);
    }
  }

  function setLive(state, msg) {
    const l = $('prompts-live');
    if (!l) return;
    l.setAttribute('data-state', state);
    l.textContent = msg;
  }

  function startEvents() {
    if (S.es) S.es.close();
    clearTimeout(S.esRetry);
    const es = new EventSource('/api/events');
    S.es = es;
    es.addEventListener('open', () => {
      setLive('live', 'Live: cards appear and go as prompts are raised and answered.');
      // the stream first, then the list: a prompt raised in between is
      // in one or the other
      syncPrompts();
    });
    const json = (ev) => { try { return JSON.parse(ev.data); } catch (e) { return null; } };
    es.addEventListener('prompt', (ev) => upsertPrompt(json(ev)));
    es.addEventListener('prompt_resolved', (ev) => {
      const d = json(ev);
      if (d && typeof d.id === 'string') removePrompt(d.id, d);
    });
    es.addEventListener('session', () => { if (S.page === 'sessions') loadSessions(); });
    es.addEventListener('ceiling', () => { if (S.page === 'ceiling') loadCeiling(); });
    es.addEventListener('error', () => {
      setLive('down', 'The event stream is down; reconnecting…');
      // a refusal ends it for good: start again ourselves
      if (es.readyState === EventSource.CLOSED) S.esRetry = setTimeout(startEvents, 3000);
    });
  }

  // ---- sessions ----------------------------------------------------

  // host:port, an IPv6 host in brackets, the host percent-encoded
  function grantPath(id, g) {
    const h = String(g.host);
    return '/v1/sessions/' + seg(id) + '/grants/' + seg(h.includes(':') ? '[' + h + ']' : h) + ':' + Number(g.port);
  }

  async function setSessionTier(id, tier) {
    try {
      await sluiced('PATCH', '/v1/sessions/' + seg(id), { tier });
      say('Session ' + id + ': tier ' + tier);
    } catch (e) {
      say('Session ' + id + ': tier not changed: ' + e.message);
    }
    loadSessions();
  }

  async function destroySession(id) {
    try {
      await sluiced('DELETE', '/v1/sessions/' + seg(id));
      say('Session ' + id + ' destroyed');
      if (S.sessionShown === id) { S.sessionShown = null; show($('session-detail'), false); }
    } catch (e) {
      say('Session ' + id + ' not destroyed: ' + e.message);
    }
    loadSessions();
  }

  async function revokeGrant(id, g) {
    try {
      await sluiced('DELETE', grantPath(id, g));
      say('Session ' + id + ': grant ' + hostport(g.host, g.port) + ' revoked');
    } catch (e) {
      say('Grant not revoked: ' + e.message);
    }
    loadSessions();
  }

  function sessionRow(s) {
    const id = s.id;
    const tierCell = el('td');
    if (canWrite() && !s.from_config) {
      const sel = tierSelect(s.tier, 'Tier of session ' + id);
      tierCell.appendChild(el('div', { class: 'inline' }, sel,
        el('button', { type: 'button', text: 'Set', 'aria-label': 'Set the tier of session ' + id, onclick: () => setSessionTier(id, sel.value) })));
    } else {
      tierCell.textContent = text(s.tier) + (s.from_config ? ' (config)' : '');
    }
    const grants = Array.isArray(s.grants) ? s.grants : [];
    const gcell = el('td');
    if (grants.length) {
      const ul = el('ul', { class: 'grants' });
      for (const g of grants) ul.appendChild(el('li', { class: 'mono', text: hostport(g.host, g.port) }));
      gcell.appendChild(ul);
    } else gcell.textContent = '–';
    const actions = el('td', {}, el('div', { class: 'inline' },
      el('button', { type: 'button', text: 'Details', 'aria-label': 'Details of session ' + id, onclick: () => { S.sessionShown = id; loadSessions(); } }),
      canWrite() && !s.from_config ? dangerButton('Destroy', 'Really destroy?', () => destroySession(id)) : null));
    return el('tr', { 'data-session': id },
      el('th', { scope: 'row', class: 'mono', text: id }), el('td', { text: text(s.tenant) }), el('td', { text: text(s.user) }),
      tierCell, el('td', { text: text(s.ceiling) }), el('td', { text: text(s.effective_tier) }),
      el('td', { text: text(s.connections) }), gcell, actions);
  }

  function sessionDetail(s) {
    const box = $('session-detail');
    if (!s) { show(box, false); return; }
    $('h-session-detail').textContent = 'Session ' + s.id;
    const c = s.counters || {};
    fieldList($('session-fields'), [
      ['Tenant', s.tenant], ['User', s.user], ['Tier', s.tier], ['Ceiling', s.ceiling], ['Effective tier', s.effective_tier],
      ['Transport', s.transport], ['Endpoint', s.socket || s.source || (s.vsock_cid !== null && s.vsock_cid !== undefined ? 'cid ' + s.vsock_cid : null)],
      ['Declared in', s.from_config ? 'the configuration file' : 'the API'], ['Open connections', s.connections],
      ['Allowed / denied', text(c.allowed) + ' / ' + text(c.denied)], ['Bytes up / down', text(c.bytes_up) + ' / ' + text(c.bytes_down)],
    ]);
    const tb = $('grants-table').tBodies[0];
    clear(tb);
    const grants = Array.isArray(s.grants) ? s.grants : [];
    for (const g of grants) {
      tb.appendChild(el('tr', {},
        el('td', { class: 'mono', text: text(g.host) }), el('td', { text: text(g.port) }),
        el('td', {}, canWrite() ? el('button', {
          type: 'button', class: 'danger', text: 'Revoke', 'aria-label': 'Revoke ' + hostport(g.host, g.port),
          onclick: () => revokeGrant(s.id, g),
        }) : null)));
    }
    show($('grants-empty'), grants.length === 0);
    show(box, true);
  }

  async function loadSessions() {
    let doc;
    try {
      doc = await sluiced('GET', '/v1/sessions');
    } catch (e) {
      say('Cannot list sessions: ' + e.message);
      return;
    }
    const list = Array.isArray(doc.sessions) ? doc.sessions : [];
    list.sort((a, b) => String(a.id).localeCompare(String(b.id)));
    const tb = $('sessions-table').tBodies[0];
    if (!busy(tb)) {
      clear(tb);
      for (const s of list) tb.appendChild(sessionRow(s));
    }
    show($('sessions-empty'), list.length === 0);
    sessionDetail(list.find((s) => s.id === S.sessionShown) || null);
    if (S.exec) loadSandboxes();
  }

  // ---- sandboxes (the executor) --------------------------------------

  function usageText(u) {
    if (!u || typeof u !== 'object') return '–';
    return Object.entries(u).map(([k, v]) => k + ' ' + text(v)).join(', ') || '–';
  }

  async function sandboxTier(id, tier) {
    try {
      await executor('PATCH', '/v1/sandboxes/' + seg(id), { network: { tier } });
      say('Sandbox ' + id + ': tier ' + tier);
    } catch (e) {
      say('Sandbox ' + id + ': tier not changed: ' + e.message);
    }
    loadSandboxes();
  }

  async function destroySandbox(id) {
    try {
      await executor('DELETE', '/v1/sandboxes/' + seg(id));
      say('Sandbox ' + id + ' destroyed');
    } catch (e) {
      say('Sandbox ' + id + ' not destroyed: ' + e.message);
    }
    loadSandboxes();
    loadSessions();
  }

  async function showCommands(id) {
    S.sandboxShown = id;
    const box = $('sandbox-detail');
    const tb = $('commands-table').tBodies[0];
    $('h-sandbox-detail').textContent = 'Recent commands of ' + id;
    let doc;
    try {
      doc = await executor('GET', '/v1/sandboxes/' + seg(id) + '/commands');
    } catch (e) {
      say('Cannot list the commands of ' + id + ': ' + e.message);
      return;
    }
    const list = Array.isArray(doc.commands) ? doc.commands.slice(-50).reverse() : [];
    clear(tb);
    for (const c of list) {
      const argv = Array.isArray(c.argv) ? c.argv.map(String).join(' ') : text(c.argv);
      tb.appendChild(el('tr', {}, el('td', { class: 'mono', text: argv }), el('td', { text: text(c.status) }),
        el('td', { text: c.signal ? 'signal ' + c.signal : text(c.exit_code) }), el('td', { text: text(c.started) }), el('td', { text: text(c.ended) })));
    }
    show($('commands-empty'), list.length === 0);
    show(box, true);
  }

  async function loadSandboxes() {
    let doc;
    try {
      doc = await executor('GET', '/v1/sandboxes');
    } catch (e) {
      say('Cannot list sandboxes: ' + e.message);
      return;
    }
    const list = Array.isArray(doc.sandboxes) ? doc.sandboxes : [];
    const tb = $('sandboxes-table').tBodies[0];
    if (busy(tb)) return;
    clear(tb);
    for (const b of list) {
      const id = b.id;
      const tier = b.network && b.network.tier;
      const tierCell = el('td');
      if (canWrite()) {
        const sel = tierSelect(tier, 'Tier of sandbox ' + id);
        tierCell.appendChild(el('div', { class: 'inline' }, sel,
          el('button', { type: 'button', text: 'Set', 'aria-label': 'Set the tier of sandbox ' + id, onclick: () => sandboxTier(id, sel.value) })));
      } else tierCell.textContent = text(tier);
      tb.appendChild(el('tr', { 'data-sandbox': id },
        el('th', { scope: 'row', class: 'mono', text: text(id) }), el('td', { text: text(b.tenant) }), el('td', { text: text(b.user) }),
        el('td', { text: text(b.state) }), el('td', { text: text(b.backend) }), el('td', { text: text(b.profile) }), tierCell,
        el('td', { text: usageText(b.usage) }), el('td', { text: text(b.last_used) }),
        el('td', {}, el('div', { class: 'inline' },
          el('button', { type: 'button', text: 'Commands', 'aria-label': 'Recent commands of sandbox ' + id, onclick: () => showCommands(id) }),
          canWrite() ? dangerButton('Destroy', 'Really destroy?', () => destroySandbox(id)) : null))));
    }
    show($('sandboxes-empty'), list.length === 0);
  }

  // ---- ceiling -----------------------------------------------------

  async function putCeiling(body, what) {
    body.close_exceeding = $('ceiling-close').checked;
    try {
      const r = await sluiced('PUT', '/v1/ceiling', body);
      say(what + (body.close_exceeding ? '; ' + text(r.closed) + ' connection(s) closed' : ''));
    } catch (e) {
      say(what + ' failed: ' + e.message);
    }
    loadCeiling();
  }

  async function loadCeiling() {
    let doc;
    try {
      doc = await sluiced('GET', '/v1/ceiling');
    } catch (e) {
      say('Cannot read the ceiling: ' + e.message);
      return;
    }
    const sel = $('ceiling-tier');
    if (document.activeElement !== sel) sel.value = doc.tier;
    $('ceiling-source').textContent = 'Set by ' + (doc.source === 'api' ? 'the API' : 'the configuration file') + '.';
    const tb = $('tenants-table').tBodies[0];
    if (busy(tb)) return;
    clear(tb);
    const tenants = doc.tenants && typeof doc.tenants === 'object' ? Object.keys(doc.tenants).sort() : [];
    for (const t of tenants) {
      const s = tierSelect(doc.tenants[t], 'Ceiling of tenant ' + t);
      tb.appendChild(el('tr', { 'data-tenant': t }, el('th', { scope: 'row', class: 'mono', text: t }), el('td', {}, s),
        el('td', {}, el('div', { class: 'inline' },
          el('button', { type: 'button', text: 'Set', 'aria-label': 'Set the ceiling of tenant ' + t,
            onclick: () => putCeiling({ tenants: { [t]: s.value } }, 'Tenant ' + t + ': ceiling ' + s.value) }),
          el('button', { type: 'button', text: 'Clear', 'aria-label': 'Clear the ceiling of tenant ' + t,
            onclick: () => putCeiling({ tenants: { [t]: null } }, 'Tenant ' + t + ': ceiling cleared') })))));
    }
    show($('tenants-empty'), tenants.length === 0);
  }

  // ---- rules and credentials ----------------------------------------

  const listText = (a) => (Array.isArray(a) && a.length ? a.join(', ') : 'any');

  async function loadRules() {
    const tb = $('rules-table').tBodies[0];
    try {
      const doc = await sluiced('GET', '/v1/rules');
      clear(tb);
      const row = (r, from) => tb.appendChild(el('tr', { 'data-rule': r.name },
        el('th', { scope: 'row', class: 'mono', text: r.name }), el('td', { text: from }),
        el('td', { text: r.tenant ? r.tenant : 'every tenant' }), el('td', { text: r.action }),
        el('td', { class: 'mono', text: listText(r.hosts) }), el('td', { text: listText(r.methods) }),
        el('td', { class: 'mono', text: listText(r.paths) })));
      for (const r of doc.config || []) row(r, 'configuration');
      for (const r of doc.rules || []) row(r, 'control API');
      for (const n of doc.builtin || []) {
        row({ name: n, tenant: null, action: 'deny', hosts: [n.includes('registries') ? 'the registry list' : 'every host'],
          methods: n.includes('registries') ? ['all but GET, HEAD'] : [], paths: n.includes('git') ? ['*/git-receive-pack'] : [] }, 'built in');
      }
    } catch (e) {
      say('Cannot read the rules: ' + e.message);
    }
    const cb = $('credentials-table').tBodies[0];
    try {
      const doc = await sluiced('GET', '/v1/credentials');
      clear(cb);
      for (const c of doc.credentials || []) {
        cb.appendChild(el('tr', { 'data-credential': c.name },
          el('th', { scope: 'row', class: 'mono', text: c.name }), el('td', { text: c.tenant }),
          el('td', { class: 'mono', text: listText(c.hosts) }), el('td', { class: 'mono', text: text(c.header) }),
          el('td', { text: listText(c.methods) }), el('td', { class: 'mono', text: listText(c.paths) })));
      }
      show($('credentials-empty'), (doc.credentials || []).length === 0);
    } catch (e) {
      say('Cannot read the credentials: ' + e.message);
    }
  }

  // ---- log ---------------------------------------------------------

  function logTarget(r) {
    if (r.host === undefined || r.host === null) return '–';
    return r.port !== undefined && r.port !== null ? hostport(r.host, r.port) : String(r.host);
  }

  function showRecord(r) {
    const pairs = Object.entries(r);
    if (typeof r.reason === 'string' && S.reasons.has(r.reason)) pairs.push(['(reason)', S.reasons.get(r.reason)]);
    $('h-log-detail').textContent = 'Record ' + text(r.seq) + ' (' + text(r.event) + ')';
    fieldList($('log-fields'), pairs);
    show($('log-detail'), true);
    $('log-detail').scrollIntoView({ block: 'nearest' });
  }

  async function loadLog(ev) {
    if (ev) ev.preventDefault();
    const q = new URLSearchParams();
    for (const name of ['session', 'decision', 'reason', 'event', 'host', 'since', 'until', 'limit']) {
      const v = $('log-' + name).value.trim();
      if (v) q.set(name, v);
    }
    const sum = $('log-summary');
    sum.textContent = 'Searching…';
    let doc;
    try {
      doc = await api('GET', '/api/log' + (q.toString() ? '?' + q.toString() : ''));
    } catch (e) {
      sum.textContent = 'Cannot read the log: ' + e.message;
      clear($('log-table').tBodies[0]);
      return;
    }
    const recs = Array.isArray(doc.records) ? doc.records.slice().reverse() : [];
    S.logRecords = recs;
    sum.textContent = text(doc.matched) + ' matching record(s) in ' + text(doc.file) +
      (doc.matched > recs.length ? '; the newest ' + recs.length + ' shown' : '') +
      (doc.bad_lines ? '; ' + doc.bad_lines + ' line(s) that are not records' : '') + '.';
    const tb = $('log-table').tBodies[0];
    clear(tb);
    recs.forEach((r) => {
      tb.appendChild(el('tr', {},
        el('td', { class: 'mono', text: text(r.ts) }), el('td', { text: text(r.event) }), el('td', { class: 'mono', text: text(r.session) }),
        el('td', { text: text(r.method) }), el('td', { class: 'mono', text: logTarget(r) }), el('td', { text: text(r.decision) }),
        el('td', { text: text(r.reason) }),
        el('td', {}, el('button', { type: 'button', text: 'Fields', 'aria-label': 'All fields of record ' + text(r.seq), onclick: () => showRecord(r) }))));
    });
    show($('log-detail'), false);
  }

  async function verifyChain() {
    const st = $('chain-status');
    st.setAttribute('data-state', 'unknown');
    st.textContent = 'Verifying the hash chain…';
    try {
      const v = await api('GET', '/api/log/verify');
      if (v.ok) {
        st.setAttribute('data-state', 'ok');
        let t = 'Chain intact: ' + v.records + ' record(s) in ' + v.file +
          (v.last_hash ? ', the last seq ' + v.last_seq + ' (hash ' + String(v.last_hash).slice(0, 16) + '…)' : '') + '.';
        if (v.anchor && v.anchor.found) t += ' It holds the last record sluiced reports (seq ' + v.anchor.seq + ').';
        if (v.fragments) t += ' ' + v.fragments + ' torn fragment(s) skipped.';
        if (v.keyed) t += ' Record MACs are not checked here (sluicectl log verify --key).';
        st.textContent = t;
      } else {
        st.setAttribute('data-state', 'bad');
        st.textContent = 'Chain broken' + (v.line ? ' at line ' + v.line : '') + ' of ' + v.file + ': ' + text(v.error) +
          ' (' + v.records + ' record(s) verified before).';
      }
    } catch (e) {
      st.setAttribute('data-state', 'unknown');
      st.textContent = 'Cannot verify: ' + e.message;
    }
  }

  async function loadReasons() {
    try {
      const doc = await api('GET', '/api/reasons');
      const dl = $('reasons');
      for (const r of doc.reasons || []) {
        S.reasons.set(r.name, r.hint);
        if (dl) dl.appendChild(el('option', { value: r.name }));
      }
    } catch (e) { /* the list only helps typing */ }
  }

  // ---- health ------------------------------------------------------

  function badge(ok, yes, no) {
    return el('span', { class: 'badge ' + (ok ? 'ok' : 'bad'), text: ok ? yes : no });
  }

  function uptime(s) {
    s = Number(s) || 0;
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return (d ? d + ' d ' : '') + (d || h ? h + ' h ' : '') + m + ' min';
  }

  function brokerPanel(h) {
    const log = h.log || {}, fw = h.firewall || {}, caller = h.caller || {};
    const panel = el('section', { class: 'panel', 'aria-labelledby': 'h-broker' },
      el('h2', { id: 'h-broker' }, 'Broker (sluiced) ', badge(h.status === 'ok', 'ok', text(h.status))));
    const dl = el('dl', { class: 'fields' });
    fieldList(dl, [['Version', h.version], ['Up for', uptime(h.uptime_s)], ['Listeners', h.listeners], ['Sessions', h.sessions],
      ['Connections', h.connections], ['Tunnels', h.tunnels], ['Global ceiling', h.ceiling], ['Draining', h.draining],
      ['Approvers', text(h.approvers) + (h.approvers ? '' : ' (no approver: prompts are refused at once unless a webhook answers)')],
      ['You', text(caller.who) + ', role ' + text(caller.role)]]);
    panel.appendChild(dl);
    panel.appendChild(el('h3', {}, 'Connection log ', badge(!!log.healthy, 'writable', 'failing')));
    const ldl = el('dl', { class: 'fields' });
    fieldList(ldl, [['File', log.path], ['Records since start', log.records], ['Write failures', log.failures]]);
    panel.appendChild(ldl);
    const fwok = fw.status !== 'failed';
    panel.appendChild(el('h3', {}, 'Firewall ', el('span', { class: 'badge ' + (fwok ? (fw.status === 'applied' ? 'ok' : 'warn') : 'bad'), text: text(fw.status) })));
    const fdl = el('dl', { class: 'fields' });
    fieldList(fdl, [['Table', fw.table], ['Applied at', fw.applied_at], ['Error', fw.error]]);
    panel.appendChild(fdl);
    return panel;
  }

  function execPanel(h) {
    const panel = el('section', { class: 'panel', 'aria-labelledby': 'h-exec' },
      el('h2', { id: 'h-exec' }, 'Executor (sluice-execd) ', badge(!!h.ok, 'ok', 'not ok')));
    const dl = el('dl', { class: 'fields' });
    fieldList(dl, [['Version', h.version], ['Default backend', h.default_backend], ['Profiles', Array.isArray(h.profiles) ? h.profiles.join(', ') : h.profiles]]);
    panel.appendChild(dl);
    panel.appendChild(el('h3', { text: 'Backends' }));
    const t = el('table', { class: 'grid' }, el('caption', { class: 'sr', text: 'Executor backends' }),
      el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Backend' }), el('th', { scope: 'col', text: 'Usable' }), el('th', { scope: 'col', text: 'Reason' }))));
    const tb = el('tbody');
    for (const b of Array.isArray(h.backends) ? h.backends : []) {
      tb.appendChild(el('tr', {}, el('th', { scope: 'row', text: text(b.name) }), el('td', {}, badge(!!b.ok, 'yes', 'no')), el('td', { text: b.ok ? '–' : text(b.reason) })));
    }
    t.appendChild(tb);
    panel.appendChild(t);
    const br = h.broker || {};
    panel.appendChild(el('h3', {}, 'Broker as the executor sees it ', badge(!!br.ok, 'reachable', 'unreachable')));
    const bdl = el('dl', { class: 'fields' });
    fieldList(bdl, [['Control socket', br.socket], ['Reason', br.ok ? null : br.reason], ['Capacity', h.capacity]]);
    panel.appendChild(bdl);
    return panel;
  }

  async function loadHealth() {
    const b = $('health-broker');
    try {
      const h = await sluiced('GET', '/v1/health');
      clear(b);
      b.appendChild(brokerPanel(h));
    } catch (e) {
      clear(b);
      b.appendChild(el('section', { class: 'panel' }, el('h2', {}, 'Broker (sluiced) ', badge(false, '', 'unreachable')), el('p', { text: e.message })));
    }
    const x = $('health-exec');
    clear(x);
    if (S.exec) {
      try {
        x.appendChild(execPanel(await executor('GET', '/v1/health')));
      } catch (e) {
        x.appendChild(el('p', { class: 'muted', text: 'Executor: ' + e.message }));
      }
    }
  }

  // ---- the executor comes and goes ------------------------------------

  async function probeExecutor() {
    let ok = false;
    try { await executor('GET', '/v1/health'); ok = true; } catch (e) { ok = false; }
    if (ok !== S.exec) {
      S.exec = ok;
      for (const n of document.querySelectorAll('[data-exec]')) show(n, ok);
      if (S.page === 'sessions') loadSessions();
      if (S.page === 'health') loadHealth();
    }
  }

  // ---- start -------------------------------------------------------

  function bindForms() {
    $('sessions-refresh').addEventListener('click', () => loadSessions());
    $('health-refresh').addEventListener('click', () => loadHealth());
    const rr = $('rules-refresh');
    if (rr) rr.addEventListener('click', () => loadRules());
    $('log-form').addEventListener('submit', loadLog);
    $('chain-verify').addEventListener('click', () => verifyChain());
    const g = $('ceiling-global');
    if (g) {
      g.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const t = $('ceiling-tier').value;
        putCeiling({ tier: t }, 'Global ceiling: ' + t);
      });
      $('ceiling-tenant').addEventListener('submit', (ev) => {
        ev.preventDefault();
        const name = $('tenant-name').value.trim();
        const t = $('tenant-tier').value;
        if (!name) return;
        putCeiling({ tenants: { [name]: t } }, 'Tenant ' + name + ': ceiling ' + t);
      });
    }
  }

  async function start() {
    try {
      S.me = await api('GET', '/api/console');
    } catch (e) {
      banner('This console cannot be used: ' + e.message);
      return;
    }
    let health = null;
    for (let i = 0; i < 1000 && !health; i++) {
      try {
        health = await sluiced('GET', '/v1/health');
      } catch (e) {
        banner('sluiced does not answer on ' + S.me.socket + ': ' + e.message + '. Trying again…');
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
    banner('');
    if (!health) return;
    const caller = health.caller || {};
    S.role = caller.role || 'auditor';
    S.who = caller.who || S.me.user;
    $('whoami').textContent = (S.me.user === S.who ? S.who : S.me.user + ' (' + S.who + ')') + ' · role ' + S.role;
    if (S.role !== 'admin') { removePage('ceiling'); removePage('rules'); }
    if (!canWrite()) removePage('prompts');
    bindForms();
    loadReasons();
    updateCount();
    await probeExecutor();
    setInterval(probeExecutor, 15000);
    setInterval(() => {
      const now = Date.now();
      for (const it of Array.from(S.prompts.values())) tickCard(it, now);
    }, 1000);
    if (canWrite()) {
      startEvents();
      // waiting counts change without an event: refresh them
      setInterval(() => { if (S.es && S.es.readyState === EventSource.OPEN) syncPrompts(); }, 5000);
    }
    window.addEventListener('hashchange', route);
    route();
  }

  document.addEventListener('DOMContentLoaded', start);
})();
