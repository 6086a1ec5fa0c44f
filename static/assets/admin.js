/*
 * admin.js — the dashboard /admin. Asks for the admin token (kept in
 * sessionStorage, sent as Authorization: Bearer). EventSource cannot send
 * headers, so the live stats come from a streaming fetch of
 * /admin/api/stream, parsed as SSE here. Draws small canvas charts of the
 * last 5 minutes and offers the queue and product controls. A refused value
 * (422 with error.field) is marked on its control (aria-invalid) with the
 * server's message next to it.
 *
 * Drop day: each queue card shows the schedule (starts_at with a countdown on
 * the server's clock, ends_at), the pre-queue, the draw's state with a link to
 * the published draw, sold out / ended / method badges and the products the
 * queue sells (from the products list). The "Sale" form edits starts_at and
 * ends_at (datetime-local in the browser's time zone, sent as RFC 3339 with
 * its offset; "Clear" sends null) and the method. Only the times the admin
 * changed are sent: re-sending a start that lost its milliseconds in the
 * input would be a change, refused while people wait.
 */
(function () {
  'use strict';

  const W = window.WaitRoom;
  if (!W || !document.getElementById('dashboard')) return;
  const { t, readError, backoffMs } = W.util;

  const TOKEN_KEY = 'wr_admin_token';
  const WINDOW_MS = 5 * 60 * 1000;
  const STALE_MS = 15000;        // no byte for this long: the stream is dead
  const PRODUCTS_POLL_MS = 5000;
  const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
  const FULL_MARGIN = 0.01;      // an instance within 1 % of its stream budget counts as full

  const lang = document.documentElement.lang || 'en';
  const num = new Intl.NumberFormat(lang);
  const num1 = new Intl.NumberFormat(lang, { maximumFractionDigits: 1 });
  const pct = new Intl.NumberFormat(lang, { style: 'percent', maximumFractionDigits: 1 });
  const rel = typeof Intl.RelativeTimeFormat === 'function' ? new Intl.RelativeTimeFormat(lang, { numeric: 'auto' }) : null;

  const $ = (id) => document.getElementById(id);
  const el = {
    login: $('login'), loginForm: $('admin-login'), tokenInput: $('admin-token'), loginError: $('login-error'),
    dashboard: $('dashboard'), conn: $('admin-conn'), updated: $('admin-updated'), error: $('admin-error'),
    logout: $('admin-logout'),
    sseTotal: $('sse-total'), waitingTotal: $('waiting-total'), admittedRate: $('admitted-rate'),
    activeTokens: $('active-tokens'), tickLag: $('tick-lag'),
    rlUser: $('rl-user'), rlIp: $('rl-ip'), rlGlobal: $('rl-global'),
    instances: $('instances'), queues: $('queues'), products: $('products'),
    newQueue: $('new-queue'), newProduct: $('new-product'), productsRefresh: $('products-refresh'),
    newProductQueue: $('new-product-queue'),
    tplQueue: $('tpl-queue'), tplProduct: $('tpl-product'),
  };
  const charts = {
    sse: $('chart-sse'), waiting: $('chart-waiting'), admitted: $('chart-admitted'),
    active: $('chart-active'), lag: $('chart-lag'), rejected: $('chart-rejected'),
  };

  let token = '';
  let stream = null;             // {ctrl, lastByte}
  let streamRetry = 0;
  let streamTimer = null;
  let watchdog = null;
  let productsTimer = null;
  let history = [];              // [{at, sse, waiting, admitted, active, lag, rl:{user,ip,global}}]
  let prev = null;               // last stats message, for rates from counters
  const queueCards = new Map();  // name -> {card, q}
  const productRows = new Map(); // id -> row
  let knownQueues = null;        // sorted queue names from the last stats message (null: none yet)
  let productList = [];          // the last GET /api/products, for "which products a queue sells"
  let serverSkew = 0;            // server clock − this clock (ms), from the stats' server_time
  const QUEUE_KNOBS = ['rate_per_second', 'max_active', 'token_ttl_seconds', 'places_per_ip', 'priority_share', 'pow_difficulty'];
  const INVITE_TTL_MS = 7 * 24 * 3600 * 1000; // the server's default expiry, shown in the form
  const PRODUCT_LIMITS = ['max_per_order', 'max_per_ticket'];

  // ---------- storage and auth ----------

  function store() { try { return window.sessionStorage; } catch (_) { return null; } }
  function loadToken() { const s = store(); return (s && s.getItem(TOKEN_KEY)) || ''; }
  function saveToken(v) { const s = store(); if (s) { if (v) s.setItem(TOKEN_KEY, v); else s.removeItem(TOKEN_KEY); } }

  function showLogin(message) {
    stopAll();
    token = '';
    saveToken('');
    el.dashboard.hidden = true;
    el.login.hidden = false;
    el.loginError.hidden = !message;
    el.loginError.textContent = message || '';
    el.tokenInput.focus();
  }

  function showDashboard() {
    el.login.hidden = true;
    el.dashboard.hidden = false;
    history = [];
    prev = null;
    startStream();
    loadProducts();
  }

  function stopAll() {
    if (stream) { stream.stopped = true; stream.ctrl.abort(); stream = null; }
    clearTimeout(streamTimer);
    clearInterval(watchdog);
    clearTimeout(productsTimer);
  }

  function errorText(err) {
    if (err && err.status === 0) return t('admin_network', { msg: err.message });
    return t('admin_error', { msg: (err && err.message) || '', code: (err && err.code) || '' });
  }

  function setError(text) {
    el.error.hidden = !text;
    el.error.textContent = text || '';
  }

  /** Authorised JSON call. Resolves {ok, status, body} or {ok:false, err}. 401 → login. */
  async function api(method, path, body) {
    const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
    } catch (e) {
      return { ok: false, err: { status: 0, code: 'network', message: String((e && e.message) || e) } };
    }
    if (res.status === 401 && path.startsWith('/admin/')) {
      showLogin(t('admin_token_refused'));
      return { ok: false, err: await readError(res) };
    }
    if (!res.ok) return { ok: false, status: res.status, err: await readFieldError(res) };
    const data = res.status === 204 ? null : await res.json().catch(() => null);
    return { ok: true, status: res.status, body: data };
  }

  /** readError, plus the input a 422 names (error.field), which readError leaves out. */
  async function readFieldError(res) {
    const copy = res.clone();
    const err = await readError(res);
    try {
      const b = await copy.json();
      if (b && b.error && typeof b.error.field === 'string' && b.error.field) err.field = b.error.field;
    } catch (_) { /* not JSON: no field */ }
    return err;
  }

  // ---------- strings not (yet) in the message catalogue ----------

  /**
   * The page's string for key, or the English fallback when the catalogue has no such key
   * (the invite strings are written into the markup in English and replaced here).
   */
  function tx(key, fallback, vars) {
    const s = W.util.messages()[key];
    const text = typeof s === 'string' ? s : fallback;
    if (!vars) return text;
    return text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
  }

  /** Puts the catalogue's strings into the elements of root marked data-i18n. */
  function localize(root) {
    for (const node of root.querySelectorAll('[data-i18n]')) {
      const s = W.util.messages()[node.dataset.i18n];
      if (typeof s === 'string') node.textContent = s;
    }
  }

  // ---------- field errors ----------

  /** The control named `name` in a form or a table row. */
  function control(root, name) {
    return root.querySelector('input[name="' + name + '"], select[name="' + name + '"]');
  }

  /** The element next to a control that shows its error (made on first use). */
  function errorSlot(ctl) {
    const root = ctl.closest('.field, td') || ctl.parentElement;
    let slot = root.querySelector('.field-error[data-error-for="' + ctl.name + '"]');
    if (!slot) {
      slot = document.createElement('span');
      slot.className = 'field-error';
      slot.dataset.errorFor = ctl.name;
      slot.hidden = true;
      ctl.after(slot);
    }
    if (!slot.id && ctl.id) slot.id = ctl.id + '-error';
    return slot;
  }

  function clearFieldError(ctl) {
    if (ctl.getAttribute('aria-invalid') !== 'true') return;
    ctl.removeAttribute('aria-invalid');
    ctl.removeAttribute('aria-describedby');
    const slot = errorSlot(ctl);
    slot.hidden = true;
    slot.textContent = '';
  }

  function clearFieldErrors(root) {
    for (const ctl of root.querySelectorAll('[aria-invalid="true"]')) clearFieldError(ctl);
  }

  /**
   * Shows a refusal: when err.field names a control in root, the control is marked
   * invalid, the server's message is put next to it and it takes the focus, and msg says
   * which field to check; otherwise msg carries the whole error as before.
   */
  function showError(root, msg, err) {
    const ctl = err && err.field ? control(root, err.field) : null;
    msg.dataset.state = 'error';
    if (!ctl) {
      msg.textContent = errorText(err);
      return;
    }
    const slot = errorSlot(ctl);
    slot.textContent = err.message || errorText(err);
    slot.hidden = false;
    ctl.setAttribute('aria-invalid', 'true');
    if (slot.id) ctl.setAttribute('aria-describedby', slot.id);
    const label = ctl.dataset.label || (ctl.labels && ctl.labels.length ? ctl.labels[0].textContent : '') || err.field;
    msg.textContent = t('admin_not_saved_field', { field: label.trim() });
    ctl.focus();
  }

  /** Typing into a refused control takes its mark off. */
  function watchFieldErrors(root) {
    const off = (e) => { if (e.target.name) clearFieldError(e.target); };
    root.addEventListener('input', off);
    root.addEventListener('change', off);
  }

  // ---------- the stats stream ----------

  function setConn(state) {
    el.conn.dataset.state = state;
    el.conn.textContent = t('conn_' + state);
  }

  /** A minimal SSE parser: feed it text chunks, it calls onEvent per event. */
  function sseParser(onEvent) {
    let buf = '';
    let data = [];
    let event = '';
    function line(l) {
      if (l === '') {
        if (data.length) onEvent({ event: event || 'message', data: data.join('\n') });
        data = [];
        event = '';
        return;
      }
      if (l[0] === ':') return; // comment (heartbeat)
      const i = l.indexOf(':');
      const field = i < 0 ? l : l.slice(0, i);
      let value = i < 0 ? '' : l.slice(i + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'event') event = value;
    }
    return function feed(chunk) {
      buf += chunk;
      let start = 0;
      for (;;) {
        const n = buf.indexOf('\n', start);
        const r = buf.indexOf('\r', start);
        let end;
        let next;
        if (r !== -1 && (n === -1 || r < n)) {
          if (r === buf.length - 1) break; // maybe \r\n split across chunks
          end = r;
          next = buf[r + 1] === '\n' ? r + 2 : r + 1;
        } else if (n !== -1) {
          end = n;
          next = n + 1;
        } else {
          break;
        }
        line(buf.slice(start, end));
        start = next;
      }
      buf = buf.slice(start);
    };
  }

  async function startStream() {
    clearTimeout(streamTimer);
    if (stream) { stream.stopped = true; stream.ctrl.abort(); }
    const s = { ctrl: new AbortController(), lastByte: Date.now(), stopped: false };
    stream = s;
    setConn(streamRetry === 0 ? 'connecting' : 'reconnecting');
    clearInterval(watchdog);
    watchdog = setInterval(() => {
      if (Date.now() - s.lastByte > STALE_MS) s.ctrl.abort(); // ends the read loop below
    }, 2000);

    let failure = null;
    try {
      const res = await fetch('/admin/api/stream', {
        headers: { Authorization: 'Bearer ' + token, Accept: 'text/event-stream' },
        cache: 'no-store',
        credentials: 'same-origin',
        signal: s.ctrl.signal,
      });
      if (res.status === 401) { showLogin(t('admin_token_refused')); return; }
      if (!res.ok || !res.body) {
        failure = await readError(res);
      } else {
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        const feed = sseParser((ev) => {
          if (ev.event !== 'message' && ev.event !== 'stats') return;
          let stats;
          try { stats = JSON.parse(ev.data); } catch (_) { return; }
          if (stream === s) {
            streamRetry = 0;
            setConn('live');
            setError('');
            onStats(stats);
          }
        });
        setConn('live');
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          s.lastByte = Date.now();
          feed(decoder.decode(value, { stream: true }));
        }
      }
    } catch (e) {
      if (s.stopped) return;
      failure = { status: 0, code: 'network', message: String((e && e.message) || e) };
    }
    if (s.stopped || stream !== s) return;
    // Ended or failed: back off and reconnect (with jitter, never a tight loop).
    clearInterval(watchdog);
    const delay = failure && failure.retryAfter != null ? W.util.retryDelayMs(failure.retryAfter) : backoffMs(streamRetry);
    streamRetry++;
    setConn('reconnecting');
    const msg = t('admin_stream_retry', { n: Math.ceil(delay / 1000) });
    setError(failure && failure.status ? errorText(failure) + ' ' + msg : msg);
    streamTimer = setTimeout(startStream, delay);
  }

  // ---------- rendering the stats ----------

  function n(v) { return typeof v === 'number' && Number.isFinite(v) ? v : 0; }

  function onStats(s) {
    const at = Number.isFinite(Date.parse(s.server_time)) ? Date.parse(s.server_time) : Date.now();
    if (Number.isFinite(Date.parse(s.server_time))) serverSkew = at - Date.now();
    const queues = Array.isArray(s.queues) ? s.queues : [];
    const instances = Array.isArray(s.instances) ? s.instances : [];
    const dt = prev ? (at - prev.at) / 1000 : 0;
    const prevQueues = new Map(((prev && prev.queues) || []).map((q) => [q.name, q]));

    let admittedRate = 0;
    const rates = new Map();
    for (const q of queues) {
      let r = null;
      if (typeof q.admit_rate === 'number') r = q.admit_rate;
      else if (dt > 0 && prevQueues.has(q.name)) r = Math.max(0, (n(q.admitted_total) - n(prevQueues.get(q.name).admitted_total)) / dt);
      rates.set(q.name, r);
      admittedRate += n(r);
    }
    const lags = queues.map((q) => q.tick_lag_ms).filter((v) => typeof v === 'number');
    const rl = s.ratelimit_rejected || {};
    const prl = (prev && prev.rl) || null;
    const rlRate = (k) => (prl && dt > 0 ? Math.max(0, (n(rl[k]) - n(prl[k])) / dt) : 0);

    const point = {
      at,
      sse: typeof s.sse_connections_total === 'number' ? s.sse_connections_total : instances.reduce((a, i) => a + n(i.sse_connections), 0),
      waiting: queues.reduce((a, q) => a + n(q.waiting), 0),
      admitted: admittedRate,
      active: queues.reduce((a, q) => a + n(q.active_tokens), 0),
      lag: lags.length ? Math.max(...lags) : null,
      rl: { user: rlRate('user'), ip: rlRate('ip'), global: rlRate('global') },
    };
    history.push(point);
    while (history.length && history[0].at < at - WINDOW_MS) history.shift();
    prev = { at, queues, rl };

    el.sseTotal.textContent = num.format(point.sse);
    el.waitingTotal.textContent = num.format(point.waiting);
    el.admittedRate.textContent = num1.format(point.admitted);
    el.activeTokens.textContent = num.format(point.active);
    el.tickLag.textContent = point.lag == null ? '–' : num.format(Math.round(point.lag));
    el.rlUser.textContent = num.format(n(rl.user));
    el.rlIp.textContent = num.format(n(rl.ip));
    el.rlGlobal.textContent = num.format(n(rl.global));
    el.updated.textContent = t('admin_updated', { time: new Date().toLocaleTimeString(lang) });

    renderInstances(instances, at);
    renderQueues(queues, rates);
    drawAll();
  }

  function ago(iso, now) {
    const ms = Date.parse(iso);
    if (!Number.isFinite(ms)) return '–';
    const secs = Math.round((ms - now) / 1000);
    if (!rel) return Math.abs(secs) + ' s';
    if (Math.abs(secs) < 90) return rel.format(secs, 'second');
    if (Math.abs(secs) < 5400) return rel.format(Math.round(secs / 60), 'minute');
    return rel.format(Math.round(secs / 3600), 'hour');
  }

  function cell(tag, text, cls) {
    const c = document.createElement(tag);
    c.textContent = text;
    if (cls) c.className = cls;
    return c;
  }

  /**
   * A cell with a count against its budget: "812 / 19,295", a meter and "4.2% used"; "no
   * budget" when the budget is 0 (none, or an instance of an older release). A count the
   * instance did not report (an older release) shows "–".
   */
  function budgetCell(value, budget, testid) {
    const td = document.createElement('td');
    td.className = 'budget';
    td.dataset.testid = testid;
    const has = typeof value === 'number' && Number.isFinite(value);
    const max = n(budget);
    const text = cell('span', !has ? '–' : max > 0 ? num.format(value) + ' / ' + num.format(max) : num.format(value), 'budget-value');
    text.dataset.testid = testid + '-value';
    td.append(text);
    if (max <= 0) {
      td.append(' ', cell('span', t('admin_no_budget'), 'budget-note muted small'));
      return td;
    }
    const used = has ? Math.max(0, value) / max : 0;
    td.append(' ', cell('span', t('admin_budget_used', { pct: pct.format(used) }), 'budget-note muted small'));
    // The meter repeats the text for the eye; screen readers get the text only.
    const m = document.createElement('meter');
    m.min = 0;
    m.max = max;
    m.value = has ? Math.min(Math.max(0, value), max) : 0;
    m.low = max * 0.75;
    m.high = max * (1 - FULL_MARGIN);
    m.optimum = 0;
    m.setAttribute('aria-hidden', 'true');
    td.append(m);
    return td;
  }

  /** An instance is full at or within FULL_MARGIN of its stream budget. */
  function isFull(i) {
    const max = n(i.max_streams);
    return max > 0 && n(i.sse_connections) >= max * (1 - FULL_MARGIN);
  }

  function renderInstances(list, now) {
    const rows = [];
    for (const i of list) {
      const tr = document.createElement('tr');
      tr.dataset.instance = i.id;
      tr.dataset.testid = 'instance-row';
      const full = isFull(i);
      tr.classList.toggle('is-full', full);
      const th = cell('th', i.id);
      th.scope = 'row';
      if (full) {
        const badge = cell('span', t('admin_full'), 'badge badge-full');
        badge.dataset.testid = 'instance-full';
        badge.title = t('admin_full') + ': ' + t('admin_full_note');
        th.append(' ', badge);
      }
      tr.append(th,
        budgetCell(typeof i.sse_connections === 'number' ? i.sse_connections : 0, i.max_streams, 'instance-streams'),
        budgetCell(i.connections, i.max_connections, 'instance-conns'),
        cell('td', Number.isFinite(Date.parse(i.started_at)) ? new Date(i.started_at).toLocaleString(lang) : '–'),
        cell('td', ago(i.last_seen, now)));
      rows.push(tr);
    }
    if (!rows.length) {
      const tr = document.createElement('tr');
      const td = cell('td', t('admin_no_instances'), 'muted');
      td.colSpan = 5;
      tr.append(td);
      rows.push(tr);
    }
    el.instances.replaceChildren(...rows);
  }

  // ---------- queue cards and controls ----------

  function field(root, name) { return root.querySelector('[data-field="' + name + '"]'); }

  function makeQueueCard(name) {
    const card = el.tplQueue.content.firstElementChild.cloneNode(true);
    card.dataset.queue = name;
    field(card, 'name').textContent = name;
    localize(card);
    const form = card.querySelector('form');
    for (const f of card.querySelectorAll('form')) {
      const prefix = 'idPrefix' in f.dataset ? f.dataset.idPrefix : f === form ? '' : 'invite-';
      for (const label of f.querySelectorAll('label[data-for]')) {
        const input = f.elements[label.dataset.for];
        input.id = 'q-' + name + '-' + prefix + label.dataset.for;
        label.htmlFor = input.id;
      }
    }
    form.querySelector('[data-testid="save-queue"]').id = 'q-' + name + '-save';
    const entry = { card, q: null, dirty: false };
    form.addEventListener('input', () => { entry.dirty = true; });
    watchFieldErrors(form);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const body = {};
      for (const k of QUEUE_KNOBS) {
        const v = form.elements[k].value.trim();
        if (v !== '') body[k] = Number(v);
      }
      // One exact origin per line (https://shop.example); the server checks each.
      body.allowed_origins = form.elements.allowed_origins.value.split(/[\s,]+/).filter((o) => o !== '');
      body.auto_redirect = form.elements.auto_redirect.checked;
      putQueue(entry, body, () => { entry.dirty = false; });
    });
    card.querySelector('[data-testid="toggle-pause"]').addEventListener('click', () => {
      if (entry.q) putQueue(entry, { paused: !entry.q.paused });
    });
    card.querySelector('[data-testid="toggle-closed"]').addEventListener('click', () => {
      if (entry.q) putQueue(entry, { closed: !entry.q.closed });
    });
    setupInvites(entry);
    setupSale(entry);
    setupBranding(entry);
    return entry;
  }

  /**
   * PUT the queue. Errors go to `form` (default: the settings form) and `msg`; a 409 about
   * the start (queue_not_empty, draw_done) is shown on starts_at when the form has it.
   */
  async function putQueue(entry, body, onOk, form, msg) {
    msg = msg || entry.card.querySelector('[data-testid="queue-msg"]');
    msg.dataset.state = 'pending';
    msg.textContent = t('admin_saving');
    form = form || entry.card.querySelector('form');
    clearFieldErrors(form);
    const r = await api('PUT', '/admin/api/queues/' + encodeURIComponent(entry.card.dataset.queue), body);
    if (!r.ok) {
      const err = Object.assign({}, r.err);
      if (!err.field && (err.code === 'queue_not_empty' || err.code === 'draw_done') && control(form, 'starts_at')) err.field = 'starts_at';
      showError(form, msg, err);
      return;
    }
    msg.dataset.state = 'ok';
    msg.textContent = t('admin_saved');
    if (onOk) onOk();
    // Mirror the saved values into the form that was saved; the other keeps its edits.
    const force = form === entry.sale.form ? 'sale' : entry.brand && form === entry.brand.form ? 'branding' : 'settings';
    if (r.body && typeof r.body === 'object' && r.body.name) updateQueueCard(entry, Object.assign({}, entry.q, r.body), null, force);
    else if (entry.q) updateQueueCard(entry, Object.assign({}, entry.q, body), null, force);
  }

  // ---------- drop day: the sale form and the schedule ----------

  /** A datetime-local value with seconds (the browser's time zone) for a time. */
  function localInputSec(d) {
    const p = (v) => String(v).padStart(2, '0');
    return localInput(d) + ':' + p(d.getSeconds());
  }

  /** RFC 3339 with the browser's offset: 2025-05-01T20:00:00+09:00. */
  function rfc3339Local(d) {
    const p = (v) => String(Math.abs(v)).padStart(2, '0');
    const off = -d.getTimezoneOffset();
    return localInputSec(d) + (off >= 0 ? '+' : '-') + p(Math.trunc(off / 60)) + ':' + p(off % 60);
  }

  /** A datetime-local value as a Date (local time), or null when it is not one. */
  function fromLocalInput(v) {
    const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(v);
    if (!m) return null;
    const d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0), +((m[7] || '0').padEnd(3, '0')));
    return isNaN(d) ? null : d;
  }

  function timeZoneName() {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (_) { return ''; }
  }

  function whenText(iso) {
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    try { return new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'medium' }).format(d); } catch (_) { return d.toLocaleString(lang); }
  }

  function clockText(seconds) {
    const s = Math.max(0, Math.ceil(seconds));
    if (s >= 48 * 3600) return t('admin_days', { n: num.format(Math.floor(s / 86400)) });
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const p = (v) => String(v).padStart(2, '0');
    return (h ? h + ':' + p(m) : String(m)) + ':' + p(s % 60);
  }

  function setupSale(entry) {
    const c = entry.card;
    const form = c.querySelector('[data-testid="sale-form"]');
    const msg = form.querySelector('[data-testid="sale-msg"]');
    const tz = timeZoneName();
    form.querySelector('[data-testid="sale-hint"]').textContent = t('admin_sale_hint', { tz: tz || 'UTC' + rfc3339Local(new Date()).slice(-6) });
    entry.sale = { form, msg, dirty: false, shown: { starts_at: '', ends_at: '' } };
    const labels = { starts_at: t('admin_starts_at'), ends_at: t('admin_ends_at'), method: t('admin_method') };
    for (const k of Object.keys(labels)) control(form, k).dataset.label = labels[k];
    form.addEventListener('input', () => { entry.sale.dirty = true; });
    form.addEventListener('change', () => { entry.sale.dirty = true; });
    watchFieldErrors(form);
    const done = () => { entry.sale.dirty = false; };
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      clearFieldErrors(form);
      const body = {};
      for (const k of ['starts_at', 'ends_at']) {
        const v = control(form, k).value;
        if (v === entry.sale.shown[k]) continue; // unchanged: not sent (its ms would be lost)
        if (v === '') { body[k] = null; continue; }
        const d = fromLocalInput(v);
        if (!d) { showError(form, msg, { field: k, message: t('admin_invite_bad_time') }); return; }
        body[k] = rfc3339Local(d);
      }
      body.method = control(form, 'method').value;
      putQueue(entry, body, done, form, msg);
    });
    for (const b of form.querySelectorAll('[data-clear]')) {
      const k = b.dataset.clear;
      b.id = 'q-' + c.dataset.queue + '-clear-' + k;
      b.setAttribute('aria-label', t('admin_clear_field', { field: labels[k] }));
      b.addEventListener('click', () => {
        clearFieldErrors(form);
        putQueue(entry, { [k]: null }, () => {
          control(form, k).value = '';
          entry.sale.shown[k] = '';
        }, form, msg);
      });
    }
    control(form, 'method').id = 'q-' + c.dataset.queue + '-method';
    form.querySelector('[data-testid="save-sale"]').id = 'q-' + c.dataset.queue + '-save-sale';
  }

  // ---------- branding (per queue card) ----------

  const BRAND_FIELDS = ['brand_name', 'brand_color', 'brand_message', 'support_url'];

  /**
   * The branding form: the four texts go in one PUT of the queue (empty clears); a chosen
   * logo file is then sent as the raw body of PUT …/logo with the file's own type (the server
   * checks the type against the bytes: 415 for another type, 422 field logo, 413 over 64 KiB).
   */
  function setupBranding(entry) {
    const c = entry.card;
    const form = c.querySelector('[data-testid="branding-form"]');
    const msg = form.querySelector('[data-testid="branding-msg"]');
    const file = control(form, 'logo');
    const remove = form.querySelector('[data-testid="brand-logo-remove"]');
    entry.brand = { form, msg, dirty: false };
    form.querySelector('[data-testid="save-branding"]').id = 'q-' + c.dataset.queue + '-brand-save';
    form.addEventListener('input', () => { entry.brand.dirty = true; });
    watchFieldErrors(form);
    const path = '/admin/api/queues/' + encodeURIComponent(c.dataset.queue) + '/logo';
    async function sendLogo(method, body, type) {
      const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
      if (type) headers['Content-Type'] = type;
      let res;
      try {
        res = await fetch(path, { method, headers, body, credentials: 'same-origin', cache: 'no-store' });
      } catch (e) {
        return { ok: false, err: { status: 0, code: 'network', message: String((e && e.message) || e) } };
      }
      if (res.status === 401) { showLogin(t('admin_token_refused')); return { ok: false, err: await readError(res) }; }
      if (!res.ok) {
        const err = await readFieldError(res);
        if (res.status === 413 || res.status === 415) err.field = 'logo';
        return { ok: false, err };
      }
      return { ok: true, body: res.status === 204 ? null : await res.json().catch(() => null) };
    }
    function showLogo(url) {
      const img = form.querySelector('[data-testid="brand-logo-preview"]');
      img.hidden = !url;
      if (url) img.src = url; else img.removeAttribute('src');
      remove.hidden = !url;
    }
    entry.brand.showLogo = showLogo;
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clearFieldErrors(form);
      const body = {};
      for (const k of BRAND_FIELDS) body[k] = form.elements[k].value.trim();
      const f = file.files && file.files[0];
      let saved = false;
      await putQueue(entry, body, () => { saved = true; entry.brand.dirty = false; }, form, msg);
      if (!saved || !f) return;
      msg.dataset.state = 'pending';
      msg.textContent = t('admin_saving');
      const r = await sendLogo('PUT', f, f.type || 'application/octet-stream');
      if (!r.ok) { showError(form, msg, r.err); return; }
      file.value = '';
      showLogo(r.body && r.body.logo_url);
      if (entry.q) entry.q.logo_url = r.body && r.body.logo_url;
      msg.dataset.state = 'ok';
      msg.textContent = t('admin_saved');
    });
    remove.addEventListener('click', async () => {
      clearFieldErrors(form);
      const r = await sendLogo('DELETE');
      if (!r.ok && r.err.code !== 'logo_not_found') { showError(form, msg, r.err); return; }
      showLogo(null);
      if (entry.q) entry.q.logo_url = null;
      msg.dataset.state = 'ok';
      msg.textContent = t('admin_saved');
    });
  }

  /** Mirrors the saved branding into the form unless the admin is editing it. */
  function updateBranding(entry, q, force) {
    const b = entry.brand;
    if (!b) return;
    if (q.logo_url !== undefined) b.showLogo(q.logo_url);
    if (force || (!b.dirty && !b.form.contains(document.activeElement))) {
      for (const k of BRAND_FIELDS) if (typeof q[k] === 'string') b.form.elements[k].value = q[k];
      if (force) b.dirty = false;
    }
  }

  /** The schedule, draw and sold-out parts of a queue card. */
  function updateSale(entry, q, force) {
    const c = entry.card;
    const now = Date.now() + serverSkew;
    field(c, 'badge-sold-out').hidden = !q.sold_out;
    field(c, 'badge-ended').hidden = !q.ended;
    const method = typeof q.method === 'string' ? q.method : 'fifo';
    const mb = field(c, 'badge-method');
    mb.hidden = method === 'fifo';
    mb.dataset.value = method;
    mb.textContent = method === 'fifo' ? '' : t('admin_badge_' + (['random', 'passthrough', 'reject'].includes(method) ? method : 'random'));

    const st = field(c, 'starts_at');
    const starts = Date.parse(q.starts_at || '');
    if (!Number.isFinite(starts)) {
      st.textContent = t('admin_not_set');
      st.dataset.seconds = '';
    } else {
      const left = (starts - now) / 1000;
      st.textContent = left > 0 ? t('admin_starts_in', { time: whenText(q.starts_at), left: clockText(left) })
        : t('admin_started', { time: whenText(q.starts_at) });
      st.dataset.seconds = String(Math.max(0, Math.ceil(left)));
    }
    const en = field(c, 'ends_at');
    const ends = Date.parse(q.ends_at || '');
    en.textContent = !Number.isFinite(ends) ? t('admin_not_set')
      : ends > now ? whenText(q.ends_at) : t('admin_passed', { time: whenText(q.ends_at) });
    const pq = field(c, 'prequeue');
    pq.textContent = typeof q.prequeue === 'number' ? num.format(q.prequeue) : '–';
    pq.dataset.value = typeof q.prequeue === 'number' ? String(q.prequeue) : '';
    const dr = field(c, 'draw');
    const draw = typeof q.draw === 'string' ? q.draw : 'none';
    dr.dataset.value = draw;
    const drawText = ['none', 'scheduled', 'drawing', 'done'].includes(draw) ? t('admin_draw_' + draw) : draw;
    if (draw === 'none') {
      dr.textContent = drawText;
    } else {
      const a = document.createElement('a');
      a.href = '/api/queues/' + encodeURIComponent(c.dataset.queue) + '/draw';
      a.textContent = t('admin_draw_link');
      a.dataset.testid = 'draw-link';
      dr.replaceChildren(drawText + ' · ', a);
    }

    // Clearing the start of a scheduled sale starts it now (the server's rule); after the
    // start it cannot change (409 draw_done), and there is nothing to clear without one.
    const clearStart = c.querySelector('[data-clear="starts_at"]');
    clearStart.textContent = draw === 'scheduled' ? t('admin_start_now') : t('admin_clear');
    clearStart.disabled = draw === 'drawing' || draw === 'done' || !q.starts_at;
    clearStart.setAttribute('aria-label', draw === 'scheduled' ? t('admin_start_now')
      : t('admin_clear_field', { field: t('admin_starts_at') }));
    c.querySelector('[data-clear="ends_at"]').disabled = !q.ends_at;

    // Keep what the admin is typing; otherwise mirror the live settings.
    const s = entry.sale;
    if (force || (!s.dirty && !s.form.contains(document.activeElement))) {
      for (const k of ['starts_at', 'ends_at']) {
        if (q[k] === undefined) continue;
        const d = q[k] ? new Date(q[k]) : null;
        const v = d && !isNaN(d) ? localInputSec(d) : '';
        control(s.form, k).value = v;
        s.shown[k] = v;
      }
      if (typeof q.method === 'string') control(s.form, 'method').value = q.method;
      if (force) s.dirty = false;
    }
    renderSells(entry);
  }

  /** Which products the queue sells, from the products list (stock 0 marks sold out). */
  function renderSells(entry) {
    const name = entry.card.dataset.queue;
    const sells = productList.filter((p) => p && p.queue === name);
    const dd = field(entry.card, 'products');
    dd.dataset.value = sells.map((p) => p.id).join(',');
    if (!sells.length) { dd.textContent = t('admin_sells_none'); return; }
    const parts = [];
    for (const p of sells) {
      if (parts.length) parts.push(', ');
      const span = cell('span', t('admin_sells_stock', { name: p.name || p.id, n: num.format(n(p.stock)) }));
      span.dataset.product = p.id;
      if (n(p.stock) === 0) span.className = 'sold-out-text';
      parts.push(span);
    }
    dd.replaceChildren(...parts);
  }

  function updateQueueCard(entry, q, rate, force) {
    entry.q = q;
    const c = entry.card;
    field(c, 'badge-paused').hidden = !q.paused;
    field(c, 'badge-closed').hidden = !q.closed;
    field(c, 'badge-leader').hidden = !q.leader;
    field(c, 'badge-leader').textContent = typeof q.leader === 'string' && q.leader ? t('admin_leader') + ': ' + q.leader : t('admin_leader');
    // Invite lanes' waiters, when the stats carry them (waiting is the normal line).
    const byInvite = n(q.waiting_priority) + n(q.waiting_bypass);
    field(c, 'waiting').textContent = num.format(n(q.waiting)) +
      (byInvite ? ' + ' + tx('admin_waiting_invites', '{n} by invite', { n: num.format(byInvite) }) : '');
    if (rate !== null && rate !== undefined) field(c, 'admit_rate').textContent = num1.format(rate);
    field(c, 'active_tokens').textContent = num.format(n(q.active_tokens)) + (q.max_active ? ' / ' + num.format(q.max_active) : '');
    field(c, 'admitted_total').textContent = num.format(n(q.admitted_total));
    field(c, 'tick_lag_ms').textContent = typeof q.tick_lag_ms === 'number' ? num.format(Math.round(q.tick_lag_ms)) : '–';
    field(c, 'settings').textContent = t('admin_settings_value', {
      rate: q.rate_per_second == null ? '–' : num1.format(q.rate_per_second),
      max: q.max_active ? num.format(q.max_active) : t('admin_no_cap'),
      ttl: q.token_ttl_seconds == null ? '–' : num.format(q.token_ttl_seconds),
    });
    field(c, 'places_per_ip').textContent = typeof q.places_per_ip !== 'number' ? '–'
      : q.places_per_ip === 0 ? t('admin_no_cap') : num.format(q.places_per_ip);
    field(c, 'priority_share').textContent = typeof q.priority_share !== 'number' ? '–' : pct.format(q.priority_share);
    const pause = c.querySelector('[data-testid="toggle-pause"]');
    pause.textContent = q.paused ? t('admin_resume') : t('admin_pause');
    pause.setAttribute('aria-pressed', q.paused ? 'true' : 'false');
    const close = c.querySelector('[data-testid="toggle-closed"]');
    close.textContent = q.closed ? t('admin_open') : t('admin_close');
    close.setAttribute('aria-pressed', q.closed ? 'true' : 'false');
    updateSale(entry, q, force === true || force === 'sale');
    updateBranding(entry, q, force === true || force === 'branding');

    // Keep what the admin is typing; otherwise mirror the live settings.
    const form = c.querySelector('form');
    if (force === true || force === 'settings' || (!entry.dirty && !form.contains(document.activeElement))) {
      for (const k of QUEUE_KNOBS) {
        if (q[k] !== undefined && q[k] !== null) form.elements[k].value = String(q[k]);
      }
      if (Array.isArray(q.allowed_origins)) form.elements.allowed_origins.value = q.allowed_origins.join('\n');
      if (typeof q.auto_redirect === 'boolean') form.elements.auto_redirect.checked = q.auto_redirect;
      if (force === true || force === 'settings') entry.dirty = false;
    }
  }

  // ---------- invite codes (per queue card) ----------

  /** A datetime-local value (the browser's time zone) for a time. */
  function localInput(d) {
    const p = (v) => String(v).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes());
  }

  function laneText(lane) {
    return lane === 'bypass' ? tx('admin_lane_bypass', 'Bypass') : tx('admin_lane_priority', 'Priority');
  }

  /**
   * Copies text to the clipboard: the async Clipboard API where the page may use it, else
   * a selected off-screen textarea and execCommand('copy'). Resolves true when copied.
   */
  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      try { await navigator.clipboard.writeText(text); return true; } catch (_) { /* fall back */ }
    }
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.className = 'visually-hidden';
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    ta.remove();
    return ok;
  }

  function setupInvites(entry) {
    const c = entry.card;
    const box = c.querySelector('[data-testid="invites"]');
    const form = c.querySelector('[data-testid="invite-form"]');
    const msg = form.querySelector('[data-testid="invite-msg"]');
    const rows = c.querySelector('[data-testid="invite-rows"]');
    const live = c.querySelector('[data-testid="invite-count-live"]');
    const path = () => '/admin/api/queues/' + encodeURIComponent(c.dataset.queue) + '/invites';
    form.elements.expires_at.value = localInput(new Date(Date.now() + INVITE_TTL_MS));
    watchFieldErrors(form);

    function say(state, text) {
      msg.dataset.state = state;
      msg.textContent = text;
    }

    function row(inv) {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'invite-row';
      tr.dataset.code = inv.code;
      const code = cell('th', inv.code);
      code.scope = 'row';
      const exp = new Date(inv.expires_at);
      tr.append(code, cell('td', laneText(inv.lane)), cell('td', num.format(inv.uses_left), 'num'),
        cell('td', isNaN(exp) ? inv.expires_at : exp.toLocaleString(lang)));
      const actions = document.createElement('td');
      const copy = document.createElement('button');
      copy.type = 'button';
      copy.className = 'button-secondary';
      copy.dataset.testid = 'invite-copy';
      copy.textContent = tx('admin_invite_copy', 'Copy link');
      const link = new URL(inv.url, location.origin).href;
      copy.addEventListener('click', async () => {
        const ok = await copyText(link);
        say(ok ? 'ok' : 'error', ok ? tx('admin_invite_copied', 'Link copied: {url}', { url: link })
          : tx('admin_invite_copy_failed', 'Copy this link: {url}', { url: link }));
      });
      const revoke = document.createElement('button');
      revoke.type = 'button';
      revoke.className = 'button-secondary';
      revoke.dataset.testid = 'invite-revoke';
      revoke.textContent = tx('admin_invite_revoke', 'Revoke');
      revoke.addEventListener('click', async () => {
        revoke.disabled = true;
        const r = await api('DELETE', path() + '/' + encodeURIComponent(inv.code));
        revoke.disabled = false;
        if (!r.ok && r.status !== 404) { say('error', errorText(r.err)); return; }
        say('ok', tx('admin_invite_revoked', 'Code revoked.'));
        load();
      });
      actions.append(copy, ' ', revoke);
      tr.append(actions);
      return tr;
    }

    async function load() {
      const r = await api('GET', path());
      if (!r.ok) { say('error', errorText(r.err)); return; }
      const list = (r.body && Array.isArray(r.body.invites)) ? r.body.invites : [];
      rows.replaceChildren(...list.map(row));
      live.textContent = tx('admin_invites_live', '{n} live codes', { n: num.format(list.length) });
    }

    // Listed when opened and after every change (no polling: an open dashboard costs
    // Redis nothing for invites).
    box.addEventListener('toggle', () => { if (box.open) load(); });
    c.querySelector('[data-testid="invite-refresh"]').addEventListener('click', load);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      clearFieldErrors(form);
      const body = { count: Number(form.elements.count.value), lane: form.elements.lane.value };
      if (form.elements.max_uses.value !== '') body.max_uses = Number(form.elements.max_uses.value);
      if (form.elements.expires_at.value !== '') {
        const d = new Date(form.elements.expires_at.value);
        if (isNaN(d)) { showError(form, msg, { field: 'expires_at', message: tx('admin_invite_bad_time', 'Not a date and time.') }); return; }
        body.expires_at = d.toISOString();
      }
      say('pending', t('admin_saving'));
      const r = await api('POST', path(), body);
      if (!r.ok) { showError(form, msg, r.err); return; }
      const n = r.body && Array.isArray(r.body.invites) ? r.body.invites.length : 0;
      say('ok', tx('admin_invites_created', '{n} codes created.', { n: num.format(n) }));
      load();
    });
  }

  function renderQueues(list, rates) {
    const seen = new Set();
    for (const q of list) {
      if (!q || typeof q.name !== 'string') continue;
      seen.add(q.name);
      let entry = queueCards.get(q.name);
      if (!entry) {
        entry = makeQueueCard(q.name);
        queueCards.set(q.name, entry);
        el.queues.append(entry.card);
      }
      updateQueueCard(entry, q, rates.get(q.name), false);
    }
    for (const [name, entry] of queueCards) {
      if (!seen.has(name)) { entry.card.remove(); queueCards.delete(name); }
    }
    let empty = el.queues.querySelector('.empty');
    if (!queueCards.size && !empty) {
      empty = cell('p', t('admin_no_queues'), 'empty muted');
      el.queues.append(empty);
    } else if (queueCards.size && empty) {
      empty.remove();
    }
    const names = [...seen].sort();
    if (!knownQueues || names.join('\n') !== knownQueues.join('\n')) {
      knownQueues = names;
      refreshQueueSelects();
    }
  }

  el.newQueue.addEventListener('submit', async (e) => {
    e.preventDefault();
    const f = el.newQueue;
    const msg = f.querySelector('[data-testid="form-msg"]');
    const name = f.elements.name.value.trim();
    if (!NAME_RE.test(name)) { f.elements.name.setAttribute('aria-invalid', 'true'); f.elements.name.focus(); return; }
    f.elements.name.removeAttribute('aria-invalid');
    const body = {};
    if (f.elements.rate_per_second.value !== '') body.rate_per_second = Number(f.elements.rate_per_second.value);
    msg.textContent = t('admin_saving');
    clearFieldErrors(f);
    const r = await api('PUT', '/admin/api/queues/' + encodeURIComponent(name), body);
    if (!r.ok) { showError(f, msg, r.err); return; }
    msg.dataset.state = 'ok';
    msg.textContent = t('admin_saved');
    f.elements.name.value = '';
  });
  watchFieldErrors(el.newQueue);

  // ---------- products ----------

  /**
   * Fills a queue <select> with "not on sale" and the known queues, keeping `want`
   * selected (listed even when no such queue exists, so saving does not change it).
   */
  function fillQueueSelect(sel, want) {
    const names = (knownQueues || []).slice();
    const missing = want && !names.includes(want);
    if (missing) names.push(want);
    const opts = [new Option(t('admin_not_on_sale'), '')];
    for (const name of names) {
      const text = missing && name === want && knownQueues ? t('admin_queue_missing', { name }) : name;
      opts.push(new Option(text, name));
    }
    const same = sel.options.length === opts.length &&
      opts.every((o, i) => sel.options[i].value === o.value && sel.options[i].text === o.text);
    if (!same) sel.replaceChildren(...opts);
    sel.value = want || '';
  }

  function refreshQueueSelects() {
    for (const tr of productRows.values()) {
      const sel = control(tr, 'queue');
      fillQueueSelect(sel, sel.value);
    }
    fillQueueSelect(el.newProductQueue, el.newProductQueue.value);
  }

  /** The PUT body of a product row or of the new-product form: limits left empty are kept. */
  function productBody(root) {
    const body = {
      name: control(root, 'name').value.trim(),
      price: Number(control(root, 'price').value),
      stock: Number(control(root, 'stock').value),
      queue: control(root, 'queue').value,
    };
    for (const k of PRODUCT_LIMITS) {
      const v = control(root, k).value.trim();
      if (v !== '') body[k] = Number(v);
    }
    return body;
  }

  function makeProductRow(id) {
    const tr = el.tplProduct.content.firstElementChild.cloneNode(true);
    tr.dataset.product = id;
    field(tr, 'id').textContent = id;
    const labels = {
      name: t('admin_product_name'), price: t('admin_product_price'), stock: t('admin_product_stock_set'),
      queue: t('admin_product_queue'), max_per_order: t('admin_max_per_order'), max_per_ticket: t('admin_max_per_ticket'),
    };
    for (const k of Object.keys(labels)) {
      const ctl = control(tr, k);
      ctl.id = 'p-' + id + '-' + k;
      ctl.setAttribute('aria-label', labels[k] + ' — ' + id);
      ctl.dataset.label = labels[k];
    }
    const dirty = () => { tr.dataset.dirty = '1'; };
    tr.addEventListener('input', dirty);
    tr.addEventListener('change', dirty);
    watchFieldErrors(tr);
    const save = tr.querySelector('[data-testid="save-product"]');
    save.id = 'p-' + id + '-save';
    save.addEventListener('click', async () => {
      const body = productBody(tr);
      const msg = tr.querySelector('[data-testid="product-msg"]');
      msg.dataset.state = 'pending';
      msg.textContent = t('admin_saving');
      clearFieldErrors(tr);
      const r = await api('PUT', '/admin/api/products/' + encodeURIComponent(id), body);
      if (!r.ok) { showError(tr, msg, r.err); return; }
      msg.dataset.state = 'ok';
      msg.textContent = t('admin_saved');
      delete tr.dataset.dirty;
      loadProducts();
    });
    return tr;
  }

  function renderProducts(list) {
    const seen = new Set();
    for (const p of list) {
      if (!p || typeof p.id !== 'string') continue;
      seen.add(p.id);
      let tr = productRows.get(p.id);
      if (!tr) {
        tr = makeProductRow(p.id);
        productRows.set(p.id, tr);
        el.products.append(tr);
      }
      field(tr, 'stock').textContent = num.format(n(p.stock));
      if (!tr.dataset.dirty && !tr.contains(document.activeElement)) {
        control(tr, 'name').value = p.name || '';
        control(tr, 'price').value = String(n(p.price));
        control(tr, 'stock').value = String(n(p.stock));
        fillQueueSelect(control(tr, 'queue'), typeof p.queue === 'string' ? p.queue : '');
        for (const k of PRODUCT_LIMITS) control(tr, k).value = typeof p[k] === 'number' ? String(p[k]) : '';
      }
    }
    for (const [id, tr] of productRows) {
      if (!seen.has(id)) { tr.remove(); productRows.delete(id); }
    }
    let empty = el.products.querySelector('.empty');
    if (!productRows.size && !empty) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      const td = cell('td', t('admin_no_products'), 'muted');
      td.colSpan = el.products.closest('table').querySelectorAll('thead th').length;
      tr.append(td);
      el.products.append(tr);
    } else if (productRows.size && empty) {
      empty.remove();
    }
  }

  async function loadProducts() {
    clearTimeout(productsTimer);
    const r = await api('GET', '/api/products');
    if (el.dashboard.hidden) return;
    if (r.ok) {
      const list = Array.isArray(r.body) ? r.body : (r.body && r.body.products) || [];
      productList = list;
      renderProducts(list);
      for (const entry of queueCards.values()) renderSells(entry);
    } else {
      setError(errorText(r.err));
    }
    productsTimer = setTimeout(loadProducts, PRODUCTS_POLL_MS);
  }

  el.productsRefresh.addEventListener('click', loadProducts);

  el.newProduct.addEventListener('submit', async (e) => {
    e.preventDefault();
    const f = el.newProduct;
    const msg = f.querySelector('[data-testid="form-msg"]');
    const id = f.elements.id.value.trim();
    if (!NAME_RE.test(id)) { f.elements.id.setAttribute('aria-invalid', 'true'); f.elements.id.focus(); return; }
    f.elements.id.removeAttribute('aria-invalid');
    const body = productBody(f);
    msg.textContent = t('admin_saving');
    clearFieldErrors(f);
    const r = await api('PUT', '/admin/api/products/' + encodeURIComponent(id), body);
    if (!r.ok) { showError(f, msg, r.err); return; }
    msg.dataset.state = 'ok';
    msg.textContent = t('admin_saved');
    f.elements.id.value = '';
    f.elements.name.value = '';
    loadProducts();
  });
  watchFieldErrors(el.newProduct);

  // ---------- charts ----------

  function cssVar(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  /** Draws series [{values:[{at, v}], color}] over the last 5 minutes. */
  function drawChart(canvas, series, now) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(100, canvas.clientWidth || 300);
    const h = Math.max(40, canvas.clientHeight || 70);
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    let max = 0;
    for (const s of series) for (const p of s.values) if (p.v != null && p.v > max) max = p.v;
    const peak = max;
    max = max <= 0 ? 1 : max * 1.05;
    const pad = 4;
    // The x axis covers what we have seen, from 20 s up to 5 minutes,
    // so a freshly opened dashboard does not squeeze its lines to the right.
    const first = history.length ? history[0].at : now;
    const span = Math.min(WINDOW_MS, Math.max(20000, now - first));
    const x = (at) => pad + ((at - (now - span)) / span) * (w - 2 * pad);
    const top = 16; // room for the scale label above the lines
    const y = (v) => h - pad - (v / max) * (h - pad - top);

    ctx.strokeStyle = cssVar('--grid', '#e3e6ea');
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(pad, h - pad + 0.5);
    ctx.lineTo(w - pad, h - pad + 0.5);
    ctx.stroke();
    ctx.fillStyle = cssVar('--muted', '#5b6472');
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    ctx.fillText(num1.format(peak), pad + 2, 2);

    for (const s of series) {
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 2;
      ctx.lineJoin = 'round';
      ctx.beginPath();
      let started = false;
      for (const p of s.values) {
        if (p.v == null) { started = false; continue; }
        if (!started) { ctx.moveTo(x(p.at), y(p.v)); started = true; } else ctx.lineTo(x(p.at), y(p.v));
      }
      ctx.stroke();
    }
  }

  function drawAll() {
    if (!history.length) return;
    const now = history[history.length - 1].at;
    const c1 = cssVar('--chart-1', '#1f6feb');
    const c2 = cssVar('--chart-2', '#b3261e');
    const c3 = cssVar('--chart-3', '#8250df');
    const pick = (k) => history.map((p) => ({ at: p.at, v: p[k] }));
    drawChart(charts.sse, [{ values: pick('sse'), color: c1 }], now);
    drawChart(charts.waiting, [{ values: pick('waiting'), color: c1 }], now);
    drawChart(charts.admitted, [{ values: pick('admitted'), color: c1 }], now);
    drawChart(charts.active, [{ values: pick('active'), color: c1 }], now);
    drawChart(charts.lag, [{ values: pick('lag'), color: c1 }], now);
    drawChart(charts.rejected, [
      { values: history.map((p) => ({ at: p.at, v: p.rl.user })), color: c1 },
      { values: history.map((p) => ({ at: p.at, v: p.rl.ip })), color: c3 },
      { values: history.map((p) => ({ at: p.at, v: p.rl.global })), color: c2 },
    ], now);
  }

  window.addEventListener('resize', () => drawAll());
  if (window.matchMedia) {
    const mq = window.matchMedia('(prefers-color-scheme: dark)');
    if (mq.addEventListener) mq.addEventListener('change', () => drawAll());
  }

  // ---------- start ----------

  el.loginForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const v = el.tokenInput.value.trim();
    if (!v) { el.tokenInput.focus(); return; }
    token = v;
    saveToken(v);
    el.tokenInput.value = '';
    el.loginError.hidden = true;
    streamRetry = 0;
    showDashboard();
  });
  el.logout.addEventListener('click', () => showLogin(''));

  token = loadToken();
  if (token) showDashboard();
  else { el.login.hidden = false; el.dashboard.hidden = true; }
})();
