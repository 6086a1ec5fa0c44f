/*
 * admin.js — the dashboard /admin. Asks for the admin token (kept in
 * sessionStorage, sent as Authorization: Bearer), or takes it from a sign-in link's
 * fragment (#token=…, removed from the address at once). EventSource cannot send
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
 *
 * Operators: each queue card draws its history (GET …/history: the last hour on load,
 * range buttons 15 min … 7 d with a step that keeps ≤ 360 points, re-read every 10 s, or
 * every minute for the longer ranges — the history is the only source, so a reload shows
 * the same points) with charts.js, links to its printable report, and edits the rate mode
 * and the adaptive token TTL. The audit log (GET /admin/api/audit) is listed, re-read after
 * every change this page makes and every 30 s. GET /admin/api/whoami says who signed in:
 * a viewer sees every changing control disabled with the reason. Every control of a queue
 * card names its queue ("Pause admission of queue drop").
 *
 * Products are listed grouped by the queue that sells them; each has its currency (a
 * select of the server's allow-list from whoami) and its price typed in major units with the
 * currency's decimals (KRW none, EUR two), sent in minor units; what buyers will see is
 * shown beside it. Changes that cannot be undone or stop a live sale (CONFIRM_KINDS: start
 * now, rotating the key, revoking a code, removing the logo, pausing, closing) go through
 * one confirmation <dialog> that names the consequence; api() refuses them unconfirmed. A
 * saved start shows the draw's commitment with a copy button.
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
    newProductQueue: $('new-product-queue'), newProductCurrency: $('new-product-currency'),
    tplQueue: $('tpl-queue'), tplProduct: $('tpl-product'),
    who: $('admin-who'), viewerNote: $('viewer-note'),
    auditRows: $('audit-rows'), auditMsg: $('audit-msg'), auditRefresh: $('audit-refresh'),
    keysRows: $('keys-rows'), keysMsg: $('keys-msg'), keysRotate: $('keys-rotate'),
    confirm: $('confirm-dialog'), confirmText: $('confirm-text'), confirmUndo: $('confirm-undo'),
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
  let currencies = [];           // [{code, digits}]: the allow-list from whoami
  let serverSkew = 0;            // server clock − this clock (ms), from the stats' server_time
  const AUDIT_POLL_MS = 30000;
  let role = '';                 // "operator" | "viewer" | "" (not told: the server predates roles)
  let auditTimer = null;
  let auditSoon = null;
  const INVITE_TTL_MS = 7 * 24 * 3600 * 1000; // the server's default expiry, shown in the form
  const PRODUCT_LIMITS = ['max_per_order', 'max_per_ticket'];

  // ---------- storage and auth ----------

  function store() { try { return window.sessionStorage; } catch (_) { return null; } }
  function loadToken() { const s = store(); return (s && s.getItem(TOKEN_KEY)) || ''; }
  function saveToken(v) { const s = store(); if (s) { if (v) s.setItem(TOKEN_KEY, v); else s.removeItem(TOKEN_KEY); } }

  function showLogin(message) {
    stopAll();
    clearRole();
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
    loadWhoami();
    loadAudit();
    loadKeys();
  }

  function stopAll() {
    if (stream) { stream.stopped = true; stream.ctrl.abort(); stream = null; }
    clearTimeout(streamTimer);
    clearInterval(watchdog);
    clearTimeout(productsTimer);
    clearTimeout(auditTimer);
    clearTimeout(auditSoon);
    for (const entry of queueCards.values()) stopHistory(entry);
  }

  /** The server's refusal as a sentence (its message; the code stays out of sight). */
  function errorText(err) {
    if (err && err.status === 0) return t('admin_network', { msg: err.message });
    return (err && err.message) || tx('admin_failed', 'The server refused the change.');
  }

  function setError(text) {
    el.error.hidden = !text;
    el.error.textContent = text || '';
  }

  /**
   * Authorised JSON call. Resolves {ok, status, body} or {ok:false, err}. 401 → login. A
   * change of one of CONFIRM_KINDS is sent only with conf, the dialog's confirmation of it.
   */
  async function api(method, path, body, conf) {
    if (method !== 'GET' && !confirmedFor(method, path, body, conf)) return unconfirmed();
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
    if (method !== 'GET') auditAfterChange();
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
    return root.querySelector('input[name="' + name + '"], select[name="' + name + '"], textarea[name="' + name + '"]');
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
      labelCells(tr, el.instances);
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
      const mode = form.elements.rate_mode.value;
      // The form's fields are the server's settings table: each control says by its kind
      // how its value is sent.
      for (const ctl of settingControls(form)) {
        const k = ctl.name;
        if (ctl.type === 'checkbox') body[k] = ctl.checked;
        else if (ctl.tagName === 'SELECT') body[k] = ctl.value;
        // One exact origin per line (https://shop.example); the server checks each.
        else if (ctl.tagName === 'TEXTAREA') body[k] = ctl.value.split(/[\s,]+/).filter((o) => o !== '');
        // In auto mode the controller sets the rate: the shown value is its current one.
        else if (k === 'rate_per_second' && mode === 'auto') continue;
        else if (ctl.value.trim() !== '') body[k] = Number(ctl.value.trim());
      }
      putQueue(entry, body, () => { entry.dirty = false; });
    });
    // Pausing and closing stop a live sale: asked first. Resuming and opening are not.
    card.querySelector('[data-testid="toggle-pause"]').addEventListener('click', async () => {
      if (!entry.q) return;
      let conf = null;
      if (!entry.q.paused && !(conf = await confirmAction('pause', t('admin_confirm_pause', { name }), t('admin_pause')))) return;
      putQueue(entry, { paused: !entry.q.paused }, null, null, null, conf);
    });
    card.querySelector('[data-testid="toggle-closed"]').addEventListener('click', async () => {
      if (!entry.q) return;
      let conf = null;
      if (!entry.q.closed && !(conf = await confirmAction('close', t('admin_confirm_close', { name }), t('admin_close')))) return;
      putQueue(entry, { closed: !entry.q.closed }, null, null, null, conf);
    });
    relabel(form.querySelector('[data-testid="save-queue"]'), tx('admin_save_settings', 'Save settings'), name);
    const modeSel = form.elements.rate_mode;
    modeSel.addEventListener('change', () => showRateMode(entry));
    const report = card.querySelector('[data-testid="report-link"]');
    report.href = '/admin/queues/' + encodeURIComponent(name) + '/report';
    report.textContent = tx('admin_report', 'Report');
    setupInvites(entry);
    setupSale(entry);
    setupBranding(entry);
    setupTemplate(entry);
    setupHistory(entry);
    nameControls(card, name);
    showRateMode(entry);
    applyRole(card);
    return entry;
  }

  /** The card's rate line (mode, current rate, why it last changed) and the token TTL in force. */
  function updateRateMode(entry, q) {
    const c = entry.card;
    const dd = field(c, 'rate_mode');
    const mode = q.rate_mode === 'auto' ? 'auto' : 'fixed';
    dd.dataset.value = mode;
    const rate = q.rate_per_second == null ? '–' : num1.format(q.rate_per_second);
    dd.textContent = mode === 'auto'
      ? tx('admin_rate_auto_now', 'auto: {rate}/s now (between {min} and {max}, target p95 {target} ms)', {
        rate, min: q.auto_min == null ? '–' : num1.format(q.auto_min), max: q.auto_max == null ? '–' : num1.format(q.auto_max),
        target: q.auto_target_p95_ms == null ? '–' : num.format(q.auto_target_p95_ms) })
      : tx('admin_rate_fixed_now', 'fixed: {rate}/s', { rate });
    if (typeof q.rate_reason === 'string' && q.rate_reason) {
      dd.append(' — ', cell('span', tx('admin_rate_reason', 'why: {reason}', { reason: q.rate_reason }), 'rate-reason'));
    }
    dd.dataset.reason = typeof q.rate_reason === 'string' ? q.rate_reason : '';
    const ttl = field(c, 'token_ttl_effective');
    const eff = q.token_ttl_effective_seconds;
    ttl.dataset.value = typeof eff === 'number' ? String(eff) : '';
    ttl.textContent = typeof eff !== 'number' ? '–' : num.format(eff) + ' s' +
      (q.token_ttl_min_seconds > 0 ? ' ' + tx('admin_ttl_adaptive', '(adaptive)') : '');
  }

  /** The controls of a queue card's settings form (one per row of the server's settings table). */
  function settingControls(form) {
    return [...form.querySelectorAll('input[name], select[name], textarea[name]')];
  }

  /** The auto controller's knobs show in auto mode only; the fixed rate in fixed mode. */
  function showRateMode(entry) {
    const form = entry.card.querySelector('form');
    const auto = form.elements.rate_mode.value === 'auto';
    for (const f of form.querySelectorAll('[data-auto-only]')) f.hidden = !auto;
    form.elements.rate_per_second.readOnly = auto;
  }

  /**
   * Gives every control of a queue card an accessible name that names the queue
   * ("Rate per second of queue drop"), so a screen reader's list of controls tells the
   * cards apart. The visible label stays the start of the name.
   */
  function nameControls(root, name) {
    for (const ctl of root.querySelectorAll('input, select, textarea, button, a[href], summary')) {
      nameControl(ctl, name);
    }
  }

  function nameControl(ctl, name) {
    let base = ctl.dataset.baseName;
    if (!base) {
      // The label by hand: a card is named before it joins the document, where .labels finds nothing.
      let label = ctl.closest('label');
      if (!label && ctl.id) label = (ctl.closest('[data-testid="queue-card"]') || document).querySelector('label[for="' + CSS.escape(ctl.id) + '"]');
      base = (label ? label.textContent : '') || ctl.getAttribute('aria-label') || ctl.textContent;
      base = base.replace(/\s+/g, ' ').trim();
      if (!base) return;
      ctl.dataset.baseName = base;
    }
    ctl.setAttribute('aria-label', tx('admin_of_queue', '{what} of queue {name}', { what: base, name }));
  }

  /** Sets a control's visible text and its queue-naming accessible name together. */
  function relabel(ctl, text, name) {
    ctl.textContent = text;
    ctl.dataset.baseName = text;
    nameControl(ctl, name);
  }

  /**
   * PUT the queue. Errors go to `form` (default: the settings form) and `msg`; a 409 about
   * the start (queue_not_empty, draw_done) is shown on starts_at when the form has it. conf:
   * the dialog's confirmation, for a change that needs one (confirmKind).
   */
  async function putQueue(entry, body, onOk, form, msg, conf) {
    msg = msg || entry.card.querySelector('[data-testid="queue-msg"]');
    msg.dataset.state = 'pending';
    msg.textContent = t('admin_saving');
    form = form || entry.card.querySelector('form');
    clearFieldErrors(form);
    const r = await api('PUT', '/admin/api/queues/' + encodeURIComponent(entry.card.dataset.queue), body, conf);
    if (!r.ok) {
      const err = Object.assign({}, r.err);
      if (!err.field && (err.code === 'queue_not_empty' || err.code === 'draw_done') && control(form, 'starts_at')) err.field = 'starts_at';
      showError(form, msg, err);
      return;
    }
    msg.dataset.state = 'ok';
    msg.textContent = t('admin_saved');
    if (onOk) onOk(r.body);
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
    // A saved start shows the draw's commitment and says where it is.
    const saved = (answer) => {
      entry.sale.dirty = false;
      if (answer && answer.draw && answer.draw !== 'none') {
        loadCommitment(entry, answer.draw);
        msg.textContent = t('admin_saved_commitment');
      }
    };
    /** Asks before a start_now (an emptied start of a scheduled sale starts it). */
    const askStart = (body, viaForm) => {
      if (confirmKind('PUT', '/admin/api/queues/' + encodeURIComponent(c.dataset.queue), body) !== 'start_now') return Promise.resolve(true);
      const n = entry.q && typeof entry.q.prequeue === 'number' ? num.format(entry.q.prequeue) : '0';
      const text = (viaForm ? t('admin_confirm_clear_start') + ' ' : '') + t('admin_confirm_start_now', { name: c.dataset.queue, n });
      return confirmAction('start_now', text, t('admin_confirm_start_now_ok'));
    };
    form.addEventListener('submit', async (e) => {
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
      const conf = await askStart(body, true);
      if (!conf) return;
      putQueue(entry, body, saved, form, msg, conf === true ? null : conf);
    });
    for (const b of form.querySelectorAll('[data-clear]')) {
      const k = b.dataset.clear;
      b.id = 'q-' + c.dataset.queue + '-clear-' + k;
      b.setAttribute('aria-label', t('admin_clear_field', { field: labels[k] }));
      b.addEventListener('click', async () => {
        clearFieldErrors(form);
        const conf = await askStart({ [k]: null }, false);
        if (!conf) return;
        putQueue(entry, { [k]: null }, (answer) => {
          control(form, k).value = '';
          entry.sale.shown[k] = '';
          if (k === 'starts_at' && answer && answer.draw && answer.draw !== 'none') loadCommitment(entry, answer.draw);
        }, form, msg, conf === true ? null : conf);
      });
    }
    setupCommitment(entry);
    control(form, 'method').id = 'q-' + c.dataset.queue + '-method';
    form.querySelector('[data-testid="save-sale"]').id = 'q-' + c.dataset.queue + '-save-sale';
  }

  // ---------- the draw's commitment (per queue card) ----------

  /**
   * The commitment box of the sale form: the SHA-256 of the draw's seed (GET …/draw, the
   * public record), a copy button and what to do with it — publish it before the start, so
   * that anyone can check the seed revealed at the draw against it.
   */
  function setupCommitment(entry) {
    const c = entry.card;
    const box = c.querySelector('[data-testid="commitment"]');
    const value = field(c, 'commitment');
    const msg = box.querySelector('[data-testid="commitment-msg"]');
    entry.commit = { box, value, msg, note: box.querySelector('[data-testid="commitment-note"]'), draw: 'none', seq: 0 };
    const copy = box.querySelector('[data-testid="commitment-copy"]');
    copy.addEventListener('click', async () => {
      const ok = value.textContent !== '' && await copyText(value.textContent);
      msg.dataset.state = ok ? 'ok' : 'error';
      msg.textContent = ok ? t('admin_commitment_copied') : t('admin_commitment_copy_failed');
      if (!ok) window.getSelection().selectAllChildren(value);
    });
  }

  /**
   * Reads the commitment when the draw's state changed, or at once with saved (the draw
   * state a save answered), and shows it.
   */
  async function loadCommitment(entry, saved) {
    const cm = entry.commit;
    const draw = saved || (entry.q && typeof entry.q.draw === 'string' ? entry.q.draw : 'none');
    if (!saved && draw === cm.draw) return;
    cm.draw = draw;
    const seq = ++cm.seq;
    if (draw === 'none') { cm.box.hidden = true; return; }
    const r = await api('GET', '/api/queues/' + encodeURIComponent(entry.card.dataset.queue) + '/draw');
    if (seq !== cm.seq) return;
    if (!r.ok) {
      if (r.status === 404) { cm.box.hidden = true; return; }
      cm.box.hidden = false;
      cm.msg.dataset.state = 'error';
      cm.msg.textContent = t('admin_commitment_unavailable', { msg: errorText(r.err) });
      return;
    }
    const hex = r.body && typeof r.body.commitment === 'string' ? r.body.commitment : '';
    cm.value.textContent = hex;
    cm.box.dataset.commitment = hex;
    cm.box.dataset.draw = draw;
    cm.note.textContent = draw === 'scheduled' ? t('admin_commitment_publish') : t('admin_commitment_after');
    cm.box.hidden = !hex;
  }

  // ---------- branding (per queue card) ----------

  /**
   * An authorised request whose body is not JSON (the logo's image, a page template's
   * HTML), with the same confirmation rule as api(). Resolves {ok, body, headers} — body is
   * the parsed JSON answer, or the text of a text/html one — or {ok:false, err}; a 413 or
   * 415 is reported as an error of field.
   */
  async function sendRaw(method, path, body, type, conf, field, extraHeaders) {
    if (!confirmedFor(method, path, undefined, conf)) return unconfirmed();
    const headers = Object.assign({ Authorization: 'Bearer ' + token, Accept: 'application/json, text/html' }, extraHeaders || {});
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
      if (res.status === 413 || res.status === 415) err.field = field;
      err.status = res.status;
      return { ok: false, err };
    }
    if (method !== 'GET' && !/\/preview$/.test(path)) auditAfterChange();
    if (res.status === 204) return { ok: true, body: null, headers: res.headers };
    const isHTML = (res.headers.get('Content-Type') || '').startsWith('text/html');
    return { ok: true, body: isHTML ? await res.text() : await res.json().catch(() => null), headers: res.headers };
  }

  const BRAND_FIELDS = ['brand_name', 'brand_color', 'brand_message', 'support_url'];
  const LOGO_MAX_BYTES = 100 * 1024; // the contract's 100 KB, built as 100 KiB (the server's limit)

  /**
   * The branding form: the four texts go in one PUT of the queue (empty clears); a chosen
   * logo file is then sent as the raw body of PUT …/logo with the file's own type (the server
   * checks the type against the bytes: 415 for another type, 422 field logo, 413 over
   * LOGO_MAX_BYTES). A file over LOGO_MAX_BYTES is refused here, before anything is saved.
   * Removing the logo asks first (the file is gone: it has to be uploaded again).
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
    const sendLogo = (method, body, type, conf) => sendRaw(method, path, body, type, conf, 'logo');
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
      if (f && f.size > LOGO_MAX_BYTES) {
        showError(form, msg, { field: 'logo', message: t('admin_logo_too_big', { size: num1.format(f.size / 1024) }) });
        return;
      }
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
      const conf = await confirmAction('remove_logo', t('admin_confirm_remove_logo', { name: c.dataset.queue }), t('admin_logo_remove'));
      if (!conf) return;
      const r = await sendLogo('DELETE', undefined, undefined, conf);
      if (!r.ok && r.err.code !== 'logo_not_found') { showError(form, msg, r.err); return; }
      showLogo(null);
      if (entry.q) entry.q.logo_url = null;
      msg.dataset.state = 'ok';
      msg.textContent = t('admin_saved');
    });
  }

  /**
   * The queue's own page (docs/TEMPLATES.md): its template is read when the box is first
   * opened; Preview renders it on the server with sample fields and shows it in a sandboxed
   * frame (no script runs there, and it has an origin of its own); Save checks and stores it
   * (422: the line and the reason next to the editor); Remove asks first and returns the
   * queue to the default page.
   */
  function setupTemplate(entry) {
    const c = entry.card;
    const box = c.querySelector('[data-testid="template-box"]');
    const form = box.querySelector('[data-testid="template-form"]');
    const msg = form.querySelector('[data-testid="template-msg"]');
    const frame = form.querySelector('[data-testid="template-frame"]');
    const remove = form.querySelector('[data-testid="template-remove"]');
    const path = '/admin/api/queues/' + encodeURIComponent(c.dataset.queue) + '/template';
    watchFieldErrors(form);
    const origins = () => form.elements.origins.value.split(/[\s,]+/).filter(Boolean).join(' ');
    const say = (state, text) => { msg.dataset.state = state; msg.textContent = text; };
    let loaded = false;
    box.addEventListener('toggle', async () => {
      if (!box.open || loaded) return;
      loaded = true;
      const r = await sendRaw('GET', path, undefined, '', undefined, 'template');
      if (r.ok) {
        form.elements.template.value = r.body || '';
        form.elements.origins.value = r.headers.get('X-Template-Origins') || '';
        remove.hidden = false;
        say('ok', t('admin_template_version', { version: r.headers.get('X-Template-Version') || '1' }));
      } else if (r.err.code === 'template_not_found') {
        remove.hidden = true;
        say('', t('admin_template_default'));
      } else {
        loaded = false;
        showError(form, msg, r.err);
      }
    });
    async function send(method, conf) {
      clearFieldErrors(form);
      const body = method === 'DELETE' ? undefined : form.elements.template.value;
      const target = method === 'POST' ? path + '/preview' : path;
      return sendRaw(method, target, body, body === undefined ? '' : 'text/html; charset=utf-8', conf, 'template', { 'X-Template-Origins': origins() });
    }
    form.querySelector('[data-testid="template-preview"]').addEventListener('click', async () => {
      const r = await send('POST');
      if (!r.ok) { frame.hidden = true; showError(form, msg, r.err); return; }
      frame.srcdoc = r.body;
      frame.hidden = false;
      say('ok', t('admin_template_previewed'));
    });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      say('pending', t('admin_saving'));
      const r = await send('PUT');
      if (!r.ok) { showError(form, msg, r.err); return; }
      remove.hidden = false;
      say('ok', t('admin_template_version', { version: String(r.body && r.body.version) }));
    });
    remove.addEventListener('click', async () => {
      const conf = await confirmAction('remove_template', t('admin_confirm_remove_template', { name: c.dataset.queue }), t('admin_template_remove'));
      if (!conf) return;
      const r = await sendRaw('DELETE', path, undefined, '', conf, 'template');
      if (!r.ok && r.err.code !== 'template_not_found') { showError(form, msg, r.err); return; }
      remove.hidden = true;
      frame.hidden = true;
      say('ok', t('admin_template_default'));
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
    clearStart.disabled = role === 'viewer' || draw === 'drawing' || draw === 'done' || !q.starts_at;
    clearStart.dataset.baseName = draw === 'scheduled' ? t('admin_start_now')
      : t('admin_clear_field', { field: t('admin_starts_at') });
    nameControl(clearStart, c.dataset.queue);
    c.querySelector('[data-clear="ends_at"]').disabled = role === 'viewer' || !q.ends_at;
    if (entry.commit) loadCommitment(entry);

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
    field(c, 'badge-held').hidden = !q.admission_held; // ticks wait for a replica's acknowledgement
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
    relabel(pause, q.paused ? t('admin_resume') : t('admin_pause'), c.dataset.queue);
    pause.setAttribute('aria-pressed', q.paused ? 'true' : 'false');
    const close = c.querySelector('[data-testid="toggle-closed"]');
    relabel(close, q.closed ? t('admin_open') : t('admin_close'), c.dataset.queue);
    close.setAttribute('aria-pressed', q.closed ? 'true' : 'false');
    updateRateMode(entry, q);
    updateSale(entry, q, force === true || force === 'sale');
    updateBranding(entry, q, force === true || force === 'branding');

    // Keep what the admin is typing; otherwise mirror the live settings.
    const form = c.querySelector('form');
    if (force === true || force === 'settings' || (!entry.dirty && !form.contains(document.activeElement))) {
      for (const ctl of settingControls(form)) {
        const v = q[ctl.name];
        if (ctl.type === 'checkbox') {
          if (typeof v === 'boolean') ctl.checked = v;
        } else if (ctl.tagName === 'TEXTAREA') {
          if (Array.isArray(v)) ctl.value = v.join('\n');
        } else if (ctl.tagName === 'SELECT') {
          if ([...ctl.options].some((o) => o.value === v)) ctl.value = v;
        } else if (v !== undefined && v !== null) {
          ctl.value = String(v);
        }
      }
      showRateMode(entry);
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
      copy.setAttribute('aria-label', tx('admin_invite_copy_named', 'Copy the link of code {code} of queue {name}', { code: inv.code, name: c.dataset.queue }));
      revoke.setAttribute('aria-label', tx('admin_invite_revoke_named', 'Revoke code {code} of queue {name}', { code: inv.code, name: c.dataset.queue }));
      revoke.addEventListener('click', async () => {
        const conf = await confirmAction('revoke_invite', t('admin_confirm_revoke', { code: inv.code }), tx('admin_invite_revoke', 'Revoke'));
        if (!conf) return;
        revoke.disabled = true;
        const r = await api('DELETE', path() + '/' + encodeURIComponent(inv.code), undefined, conf);
        revoke.disabled = false;
        if (!r.ok && r.status !== 404) { say('error', errorText(r.err)); return; }
        say('ok', tx('admin_invite_revoked', 'Code revoked.'));
        load();
      });
      actions.append(copy, ' ', revoke);
      tr.append(actions);
      labelCells(tr, rows);
      applyRole(tr);
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
      if (!seen.has(name)) { stopHistory(entry); entry.card.remove(); queueCards.delete(name); }
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
    replaceOptions(sel, opts);
    sel.value = want || '';
  }

  function replaceOptions(sel, opts) {
    const same = sel.options.length === opts.length &&
      opts.every((o, i) => sel.options[i].value === o.value && sel.options[i].text === o.text);
    if (!same) sel.replaceChildren(...opts);
  }

  function refreshQueueSelects() {
    for (const tr of productRows.values()) {
      const sel = control(tr, 'queue');
      fillQueueSelect(sel, sel.value);
    }
    fillQueueSelect(el.newProductQueue, el.newProductQueue.value);
    renderProducts(productList);
  }

  // Currencies: the allow-list comes from whoami (the server's own list and decimals); a
  // product's currency_digits fills in for a server that does not send it.
  const currencyNames = typeof Intl.DisplayNames === 'function' ? new Intl.DisplayNames([lang], { type: 'currency' }) : null;

  function digitsOf(code) {
    const c = currencies.find((x) => x.code === code);
    if (c) return c.digits;
    const p = productList.find((x) => x && x.currency === code && typeof x.currency_digits === 'number');
    return p ? p.currency_digits : 2;
  }

  function currencyLabel(code) {
    let name = '';
    try { name = currencyNames ? currencyNames.of(code) : ''; } catch (_) { name = ''; }
    return name && name !== code ? code + ' · ' + name : code;
  }

  /**
   * Fills a currency <select> with the allowed codes, keeping `want` (listed even when the
   * list lacks it). chooser (the new-product form): the options name the currency too ("KRW ·
   * South Korean won": typing KRW picks it) after a first "Choose a currency" (a price
   * without a currency is refused here).
   */
  function fillCurrencySelect(sel, want, chooser) {
    // A server that does not send the list (the release before, during a rolling deploy):
    // the products' own currencies and the API's default.
    const codes = currencies.length ? currencies.map((c) => c.code)
      : [...new Set(['USD', ...productList.filter((p) => p && p.currency).map((p) => p.currency)])].sort();
    if (want && !codes.includes(want)) codes.push(want);
    const opts = chooser ? [new Option(t('admin_currency_choose'), '')] : [];
    for (const code of codes) {
      // A row's narrow select shows the code; the form's names the currency too.
      const o = new Option(chooser ? currencyLabel(code) : code, code);
      if (!chooser) o.title = currencyLabel(code);
      opts.push(o);
    }
    replaceOptions(sel, opts);
    sel.value = want || '';
  }

  /** The currency the new-product form starts with: the one every product has, if they share one. */
  function usualCurrency() {
    const seen = new Set(productList.filter((p) => p && p.currency).map((p) => p.currency));
    return seen.size === 1 ? [...seen][0] : '';
  }

  function refreshNewProductCurrency() {
    const sel = el.newProductCurrency;
    const want = sel.dataset.touched ? sel.value : (sel.value || usualCurrency());
    fillCurrencySelect(sel, want, true);
    pricePreview(el.newProduct);
  }

  /** Minor units as the major-unit text of a price input: 18900 with 2 decimals is "189.00". */
  function majorText(minor, digits) {
    const neg = minor < 0;
    let s = String(Math.abs(Math.trunc(minor)));
    if (!digits) return (neg ? '-' : '') + s;
    s = s.padStart(digits + 1, '0');
    return (neg ? '-' : '') + s.slice(0, -digits) + '.' + s.slice(-digits);
  }

  function priceExample(digits) { return digits ? majorText(12990 * Math.pow(10, digits - 2 > 0 ? digits - 2 : 0), digits) : '189000'; }

  /**
   * A price typed in major units of the currency as minor units ({minor}), or the reason it
   * is not one ({err}). More decimals than the currency has are refused (KRW has none, EUR
   * two): rounding them away would sell at a price nobody typed. The range is the server's
   * to judge (its 422 names the field).
   */
  function parsePrice(text, code) {
    const digits = digitsOf(code);
    const m = /^(-?)(\d+)(?:\.(\d*))?$/.exec(String(text).trim());
    if (!m) return { err: t('admin_price_bad', { example: priceExample(digits) }) };
    const frac = (m[3] || '').replace(/0+$/, '');
    if (frac.length > digits) {
      return { err: digits === 0 ? t('admin_price_whole', { currency: code }) : t('admin_price_decimals', { currency: code, n: digits }) };
    }
    const minor = Number((m[2] + frac.padEnd(digits, '0')).replace(/^0+(?=\d)/, ''));
    return { minor: m[1] ? -minor : minor };
  }

  function money(minor, code, digits) {
    try {
      return new Intl.NumberFormat(lang, { style: 'currency', currency: code, minimumFractionDigits: digits, maximumFractionDigits: digits })
        .format(minor / Math.pow(10, digits));
    } catch (_) {
      return majorText(minor, digits) + ' ' + code;
    }
  }

  /** Shows next to the price what buyers will see ("Buyers see ₩189,000") and sets the input's step. */
  function pricePreview(root) {
    const code = control(root, 'currency').value;
    const input = control(root, 'price');
    const out = root.querySelector('[data-testid="price-shows"]');
    const digits = code ? digitsOf(code) : 2;
    input.step = digits ? String(Math.pow(10, -digits).toFixed(digits)) : '1';
    const p = code && input.value !== '' ? parsePrice(input.value, code) : null;
    const text = p && !p.err && p.minor >= 0 ? t('admin_price_shows', { amount: money(p.minor, code, digits) }) : '';
    out.textContent = text;
    out.dataset.minor = p && !p.err ? String(p.minor) : '';
  }

  /**
   * The PUT body of a product row or of the new-product form ({body}), or the first field
   * this page can already tell is wrong ({err: {field, message}}). Limits and stock left
   * empty are kept; everything else is the server's to judge, and its 422 names the field.
   */
  function productBody(root) {
    const code = control(root, 'currency').value;
    if (!code) return { err: { field: 'currency', message: t('admin_currency_required') } };
    const price = parsePrice(control(root, 'price').value, code);
    if (price.err) return { err: { field: 'price', message: price.err } };
    const body = {
      name: control(root, 'name').value.trim(),
      currency: code,
      price: price.minor,
      queue: control(root, 'queue').value,
    };
    for (const k of ['stock', ...PRODUCT_LIMITS]) {
      const v = control(root, k).value.trim();
      if (v !== '') body[k] = Number(v);
    }
    return { body };
  }

  const PRODUCT_LABELS = () => ({
    name: t('admin_product_name'), currency: t('admin_product_currency'), price: t('admin_product_price_major'),
    stock: t('admin_product_stock_set'), queue: t('admin_product_queue'),
    max_per_order: t('admin_max_per_order'), max_per_ticket: t('admin_max_per_ticket'),
  });

  function makeProductRow(id) {
    const tr = el.tplProduct.content.firstElementChild.cloneNode(true);
    tr.dataset.product = id;
    labelCells(tr, el.products);
    applyRole(tr);
    field(tr, 'id').textContent = id;
    const labels = PRODUCT_LABELS();
    for (const k of Object.keys(labels)) {
      const ctl = control(tr, k);
      ctl.id = 'p-' + id + '-' + k;
      ctl.setAttribute('aria-label', labels[k] + ' — ' + id);
      ctl.dataset.label = labels[k];
    }
    const dirty = () => { tr.dataset.dirty = '1'; pricePreview(tr); };
    tr.addEventListener('input', dirty);
    tr.addEventListener('change', dirty);
    watchFieldErrors(tr);
    const save = tr.querySelector('[data-testid="save-product"]');
    save.id = 'p-' + id + '-save';
    save.setAttribute('aria-label', t('admin_save') + ' — ' + id);
    save.addEventListener('click', async () => {
      const msg = tr.querySelector('[data-testid="product-msg"]');
      clearFieldErrors(tr);
      const b = productBody(tr);
      if (b.err) { showError(tr, msg, b.err); return; }
      msg.dataset.state = 'pending';
      msg.textContent = t('admin_saving');
      const r = await api('PUT', '/admin/api/products/' + encodeURIComponent(id), b.body);
      if (!r.ok) { showError(tr, msg, r.err); return; }
      msg.dataset.state = 'ok';
      msg.textContent = t('admin_saved');
      delete tr.dataset.dirty;
      loadProducts();
    });
    return tr;
  }

  /** The <tbody> of the products a queue sells ('' : not on sale), with its heading row. */
  function productGroup(queueName) {
    for (const tb of el.products.tBodies) if (tb.dataset.group === queueName) return tb;
    const tb = document.createElement('tbody');
    tb.dataset.group = queueName;
    tb.dataset.testid = 'product-group';
    const head = document.createElement('tr');
    head.className = 'group-head';
    const th = cell('th', queueName ? t('admin_products_group', { name: queueName }) : t('admin_products_group_none'));
    th.scope = 'rowgroup';
    th.colSpan = el.products.tHead.rows[0].cells.length;
    head.append(th);
    tb.append(head);
    return tb;
  }

  /**
   * Lists the products grouped by the queue that sells them (the known queues in name
   * order, then queues that do not exist, then "not on sale"). A row moves to its new group
   * once its change is saved; the focus stays where it was.
   */
  function renderProducts(list) {
    const focused = el.products.contains(document.activeElement) ? document.activeElement : null;
    const seen = new Set();
    const groups = new Map();
    for (const p of list) {
      if (!p || typeof p.id !== 'string') continue;
      seen.add(p.id);
      let tr = productRows.get(p.id);
      if (!tr) {
        tr = makeProductRow(p.id);
        productRows.set(p.id, tr);
      }
      const q = typeof p.queue === 'string' ? p.queue : '';
      if (!groups.has(q)) groups.set(q, []);
      groups.get(q).push(tr);
      field(tr, 'stock').textContent = num.format(n(p.stock));
      const code = typeof p.currency === 'string' && p.currency ? p.currency : 'USD';
      if (!tr.dataset.dirty && !tr.contains(document.activeElement)) {
        control(tr, 'name').value = p.name || '';
        fillCurrencySelect(control(tr, 'currency'), code, false);
        control(tr, 'price').value = majorText(n(p.price), typeof p.currency_digits === 'number' ? p.currency_digits : digitsOf(code));
        control(tr, 'stock').value = String(n(p.stock));
        fillQueueSelect(control(tr, 'queue'), q);
        for (const k of PRODUCT_LIMITS) control(tr, k).value = typeof p[k] === 'number' ? String(p[k]) : '';
        pricePreview(tr);
      } else {
        const sel = control(tr, 'currency');
        fillCurrencySelect(sel, sel.value, false);
      }
    }
    for (const [id, tr] of productRows) {
      if (!seen.has(id)) { tr.remove(); productRows.delete(id); }
    }
    const known = knownQueues || [];
    const order = [...groups.keys()].sort((a, b) => {
      const rank = (x) => (x === '' ? 2 : known.includes(x) ? 0 : 1);
      return rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0);
    });
    const want = [];
    for (const q of order) {
      const tb = productGroup(q);
      want.push(tb);
      const rows = groups.get(q);
      const have = [...tb.rows].slice(1);
      if (have.length !== rows.length || have.some((r, i) => r !== rows[i])) tb.append(...rows);
    }
    if (!want.length) {
      let empty = [...el.products.tBodies].find((tb) => tb.classList.contains('empty'));
      if (!empty) {
        empty = document.createElement('tbody');
        empty.className = 'empty';
        const tr = document.createElement('tr');
        const td = cell('td', t('admin_no_products'), 'muted');
        td.colSpan = el.products.tHead.rows[0].cells.length;
        tr.append(td);
        empty.append(tr);
      }
      want.push(empty);
    }
    const now = [...el.products.tBodies];
    if (now.length !== want.length || now.some((tb, i) => tb !== want[i])) {
      for (const tb of now) if (!want.includes(tb)) tb.remove();
      el.products.append(...want);
    }
    if (focused && focused.isConnected && document.activeElement !== focused) focused.focus();
  }

  async function loadProducts() {
    clearTimeout(productsTimer);
    const r = await api('GET', '/api/products');
    if (el.dashboard.hidden) return;
    if (r.ok) {
      const list = Array.isArray(r.body) ? r.body : (r.body && r.body.products) || [];
      productList = list;
      renderProducts(list);
      refreshNewProductCurrency();
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
    clearFieldErrors(f);
    const id = f.elements.id.value.trim();
    if (!NAME_RE.test(id)) {
      showError(f, msg, { field: 'id', message: t('admin_product_id_rule') });
      return;
    }
    const b = productBody(f);
    if (b.err) { showError(f, msg, b.err); return; }
    msg.dataset.state = 'pending';
    msg.textContent = t('admin_saving');
    const r = await api('PUT', '/admin/api/products/' + encodeURIComponent(id), b.body);
    if (!r.ok) { showError(f, msg, r.err); return; }
    msg.dataset.state = 'ok';
    msg.textContent = t('admin_saved');
    f.elements.id.value = '';
    f.elements.name.value = '';
    loadProducts();
  });
  watchFieldErrors(el.newProduct);
  el.newProduct.addEventListener('input', () => pricePreview(el.newProduct));
  el.newProduct.addEventListener('change', (e) => {
    if (e.target === el.newProductCurrency) el.newProductCurrency.dataset.touched = '1';
    pricePreview(el.newProduct);
  });
  for (const [k, label] of Object.entries(PRODUCT_LABELS())) {
    const ctl = control(el.newProduct, k);
    if (ctl) ctl.dataset.label = label;
  }

  // ---------- operators: roles, confirmation, tables on small screens ----------

  // ---------- irreversible actions and the confirmation dialog ----------

  /**
   * The changes this page can make that cannot be undone, or that stop a live sale at once,
   * by kind. Each one is asked first in the confirmation dialog, whose text names its
   * consequence (undo: false adds "This cannot be undone."). api() and the logo requests
   * refuse a request of one of these kinds unless it carries the confirmation the dialog's
   * Confirm button gave for that kind (one use each) — a new control cannot skip the dialog.
   * confirmKind says which requests they are; an unknown DELETE is kind "delete", which no
   * control confirms: it is refused until it gets a kind and a sentence of its own.
   */
  const CONFIRM_KINDS = {
    start_now: { undo: false },     // starts_at null on a scheduled queue: the draw runs, the seed is revealed
    rotate_key: { undo: false },    // a new signing key
    revoke_key: { undo: false },    // a signing key and every token it signed stop working
    revoke_invite: { undo: false }, // the code stops working
    remove_logo: { undo: false },   // the logo file is deleted
    remove_template: { undo: true }, // the queue's own page: the default page at once (the audit log keeps the source)
    pause: { undo: true },          // nobody is let in until resumed
    close: { undo: true },          // nobody new may join until reopened
  };

  /** The kind of confirmation a request needs ('' for none). */
  function confirmKind(method, path, body) {
    const p = String(path).split('?')[0];
    if (method === 'DELETE') {
      if (/^\/admin\/api\/queues\/[^/]+\/invites\/[^/]+$/.test(p)) return 'revoke_invite';
      if (/^\/admin\/api\/queues\/[^/]+\/logo$/.test(p)) return 'remove_logo';
      if (/^\/admin\/api\/queues\/[^/]+\/template$/.test(p)) return 'remove_template';
      if (/^\/admin\/api\/keys\/[^/]+$/.test(p)) return 'revoke_key';
      return 'delete';
    }
    if (method === 'POST' && p === '/admin/api/keys/rotate') return 'rotate_key';
    const m = /^\/admin\/api\/queues\/([^/]+)$/.exec(p);
    if (method === 'PUT' && m && body && typeof body === 'object') {
      const entry = queueCards.get(decodeURIComponent(m[1]));
      const q = entry && entry.q;
      // A queue whose state this page does not know is taken as scheduled: asking once too
      // often is the safe mistake.
      if (body.starts_at === null && (!q || q.draw === 'scheduled')) return 'start_now';
      if (body.paused === true && !(q && q.paused)) return 'pause';
      if (body.closed === true && !(q && q.closed)) return 'close';
    }
    return '';
  }

  const confirmations = new WeakSet(); // given by the dialog's Confirm button, used up by the request

  /** Whether a request may go: it needs no confirmation, or carries an unused one of its kind. */
  function confirmedFor(method, path, body, conf) {
    const kind = confirmKind(method, path, body);
    if (!kind) return true;
    if (!conf || conf.kind !== kind || !confirmations.has(conf)) {
      console.error('waitroom dashboard: ' + method + ' ' + path + ' needs the confirmation "' + kind + '" first');
      return false;
    }
    confirmations.delete(conf);
    return true;
  }

  const unconfirmed = () => ({ ok: false, err: { status: 0, code: 'unconfirmed', message: t('admin_confirm_unconfirmed') } });

  /**
   * Asks before a change of one of CONFIRM_KINDS in a modal <dialog>: the text names the
   * consequence, okText the action. The focus moves to Cancel (the safe answer); Escape and
   * Cancel answer no; the focus returns to the control that asked. Resolves the confirmation
   * to pass to api() (Confirm) or null.
   */
  function confirmAction(kind, text, okText) {
    const d = el.confirm;
    const spec = CONFIRM_KINDS[kind];
    if (!spec) throw new Error('confirmAction: unknown kind ' + kind);
    const grant = () => { const c = { kind }; confirmations.add(c); return c; };
    if (!d || typeof d.showModal !== 'function') return Promise.resolve(window.confirm(text) ? grant() : null);
    const opener = document.activeElement;
    el.confirmText.textContent = text;
    el.confirmUndo.hidden = spec.undo;
    d.dataset.kind = kind;
    $('confirm-ok').textContent = okText || t('admin_confirm_ok');
    d.returnValue = '';
    return new Promise((resolve) => {
      // Answered by the buttons' clicks and Escape's cancel, which belong to this showing —
      // not by the close event, which is queued: the previous answer's close may arrive after
      // this showing began (a quick Cancel, then the same button again).
      const ok = $('confirm-ok'), cancel = $('confirm-cancel');
      const done = (v) => {
        ok.removeEventListener('click', onOk);
        cancel.removeEventListener('click', onCancel);
        d.removeEventListener('cancel', onCancel);
        if (d.open) d.close(v ? 'ok' : 'cancel');
        d.dataset.kind = '';
        if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
        resolve(v ? grant() : null);
      };
      const onOk = (e) => { e.preventDefault(); done(true); };
      const onCancel = (e) => { e.preventDefault(); done(false); };
      ok.addEventListener('click', onOk);
      cancel.addEventListener('click', onCancel);
      d.addEventListener('cancel', onCancel);
      d.showModal();
      cancel.focus(); // the safe answer is the default
    });
  }

  /** Read-only controls stay usable for a viewer: they change nothing on the server. */
  function readOnlyControl(ctl) {
    return ctl.id === 'admin-logout' || ctl.id === 'audit-refresh' || ctl.id === 'products-refresh' ||
      ctl.matches('[data-range], [data-testid="invite-refresh"], [data-testid="invite-copy"], [data-testid="commitment-copy"], #confirm-dialog *');
  }

  /** A viewer's token may only read: every changing control under root is disabled, with the reason. */
  function applyRole(root) {
    if (role !== 'viewer') return;
    for (const ctl of root.querySelectorAll('input, select, textarea, button')) {
      if (readOnlyControl(ctl) || ctl.dataset.viewerOff) continue;
      ctl.dataset.viewerOff = ctl.disabled ? 'was' : '1';
      ctl.disabled = true;
      ctl.setAttribute('aria-describedby', 'viewer-note');
      ctl.title = el.viewerNote.textContent;
    }
  }

  /** Signing out undoes a viewer's locks, so the next token starts from its own role. */
  function clearRole() {
    role = '';
    document.body.classList.remove('is-viewer');
    el.viewerNote.hidden = true;
    el.who.textContent = '';
    el.who.dataset.role = '';
    for (const ctl of document.querySelectorAll('[data-viewer-off]')) {
      if (ctl.dataset.viewerOff === '1') ctl.disabled = false;
      delete ctl.dataset.viewerOff;
      ctl.removeAttribute('aria-describedby');
      ctl.removeAttribute('title');
    }
  }

  async function loadWhoami() {
    const r = await api('GET', '/admin/api/whoami');
    if (!r.ok || !r.body) {
      // An older server has no roles: say nothing and keep every control.
      el.who.textContent = '';
      return;
    }
    role = r.body.role === 'viewer' ? 'viewer' : 'operator';
    el.who.dataset.role = role;
    el.who.dataset.actor = String(r.body.actor || '');
    el.who.textContent = tx('admin_who', 'Signed in as {actor} ({role})', {
      actor: r.body.actor || '?', role: role === 'viewer' ? tx('admin_role_viewer', 'viewer: reads only') : tx('admin_role_operator', 'operator'),
    });
    el.viewerNote.textContent = tx('admin_viewer_note', 'This token can only read. Every control that changes something is disabled; ask an operator for changes.');
    el.viewerNote.hidden = role !== 'viewer';
    document.body.classList.toggle('is-viewer', role === 'viewer');
    if (Array.isArray(r.body.currencies)) {
      currencies = r.body.currencies.filter((c) => c && typeof c.code === 'string' && typeof c.digits === 'number');
      renderProducts(productList);
      refreshNewProductCurrency();
    }
    applyRole(el.dashboard);
  }

  /**
   * Puts each column's header on its cells (data-label): below 600 px the tables stack,
   * one cell under the other with its header in front, instead of scrolling sideways.
   */
  function labelCells(tr, body) {
    const table = (body || tr).closest('table');
    if (!table) return;
    const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
    [...tr.children].forEach((c, i) => { if (heads[i]) c.dataset.label = heads[i]; });
  }

  // ---------- the audit log ----------

  /** A change this page made shows in the log: re-read it shortly after. */
  function auditAfterChange() {
    clearTimeout(auditSoon);
    auditSoon = setTimeout(loadAudit, 300);
  }

  function shortValue(v) {
    if (v === undefined) return '–';
    const s = typeof v === 'string' && v !== '' ? v : JSON.stringify(v);
    return s.length > 40 ? s.slice(0, 39) + '…' : s;
  }

  /** The keys whose values differ between before and after, as "key: old → new". */
  function auditDiff(before, after) {
    const b = before && typeof before === 'object' ? before : {};
    const a = after && typeof after === 'object' ? after : {};
    const keys = [...new Set([...Object.keys(b), ...Object.keys(a)])].sort();
    const out = [];
    for (const k of keys) {
      if (JSON.stringify(b[k]) === JSON.stringify(a[k])) continue;
      if (!before) out.push(k + ': ' + shortValue(a[k]));
      else if (!after) out.push(k + ': ' + shortValue(b[k]) + ' → –');
      else out.push(k + ': ' + shortValue(b[k]) + ' → ' + shortValue(a[k]));
    }
    return out;
  }

  function auditRow(e) {
    const tr = document.createElement('tr');
    tr.dataset.testid = 'audit-row';
    tr.dataset.action = String(e.action || '');
    tr.dataset.target = String(e.target || '');
    const at = new Date(e.at);
    const when = cell('th', isNaN(at) ? String(e.at) : at.toLocaleString(lang));
    when.scope = 'row';
    const diff = auditDiff(e.before, e.after);
    const change = document.createElement('td');
    change.className = 'audit-diff';
    if (!diff.length) change.textContent = '–';
    const shown = diff.slice(0, 6);
    for (const line of shown) {
      const c = cell('code', line);
      change.append(c, document.createElement('br'));
    }
    if (diff.length > shown.length) change.append(cell('span', tx('admin_audit_more', '+{n} more', { n: diff.length - shown.length }), 'muted small'));
    tr.append(when, cell('td', String(e.actor || '')), cell('td', String(e.action || '')), cell('td', String(e.target || '')), change);
    labelCells(tr, el.auditRows);
    return tr;
  }

  async function loadAudit() {
    clearTimeout(auditTimer);
    clearTimeout(auditSoon);
    const r = await api('GET', '/admin/api/audit?limit=50');
    if (el.dashboard.hidden) return;
    if (!r.ok) {
      el.auditMsg.textContent = tx('admin_audit_unavailable', 'The audit log cannot be read: {msg}', { msg: errorText(r.err) });
      el.auditMsg.dataset.state = 'error';
    } else {
      const list = (r.body && Array.isArray(r.body.entries)) ? r.body.entries : [];
      el.auditRows.replaceChildren(...list.map(auditRow));
      el.auditMsg.dataset.state = 'ok';
      el.auditMsg.textContent = list.length ? tx('admin_audit_count', 'The last {n} changes, newest first.', { n: num.format(list.length) })
        : tx('admin_audit_empty', 'No change recorded yet.');
    }
    auditTimer = setTimeout(loadAudit, AUDIT_POLL_MS);
  }

  el.auditRefresh.addEventListener('click', loadAudit);

  // ---------- token signing keys ----------

  function renderKeys(body) {
    const keys = body && Array.isArray(body.keys) ? body.keys : [];
    el.keysRows.replaceChildren(...keys.map((k) => {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'key-row';
      const id = cell('th', k.kid);
      id.scope = 'row';
      const fmt = (v) => (Number.isFinite(Date.parse(v)) ? new Date(v).toLocaleString(lang) : '–');
      const state = k.retired_at ? tx('admin_key_retired', 'retired {time}', { time: fmt(k.retired_at) })
        : k.kid === body.signing ? tx('admin_key_signing', 'signing') : tx('admin_key_verifying', 'verifies only');
      const action = document.createElement('td');
      if (k.kid !== body.signing) {
        // Only a key that does not sign now can go (the server refuses the signing one).
        const revoke = document.createElement('button');
        revoke.type = 'button';
        revoke.className = 'button-secondary';
        revoke.dataset.testid = 'key-revoke';
        revoke.textContent = t('admin_key_revoke');
        revoke.setAttribute('aria-label', t('admin_key_revoke_named', { kid: k.kid }));
        revoke.addEventListener('click', () => revokeKey(k.kid, revoke));
        action.append(revoke);
      }
      tr.append(id, cell('td', fmt(k.created_at)), cell('td', fmt(k.signs_from)), cell('td', state), action);
      labelCells(tr, el.keysRows);
      applyRole(tr);
      return tr;
    }));
  }

  async function revokeKey(kid, button) {
    const conf = await confirmAction('revoke_key', t('admin_confirm_revoke_key', { kid }), t('admin_key_revoke'));
    if (!conf) return;
    button.disabled = true;
    el.keysMsg.textContent = t('admin_saving');
    const r = await api('DELETE', '/admin/api/keys/' + encodeURIComponent(kid), undefined, conf);
    button.disabled = false;
    if (!r.ok) { el.keysMsg.textContent = errorText(r.err); return; }
    el.keysMsg.textContent = t('admin_key_revoked');
    renderKeys(r.body);
  }

  async function loadKeys() {
    const r = await api('GET', '/admin/api/keys');
    if (!r.ok) {
      el.keysMsg.textContent = errorText(r.err);
      el.keysRotate.disabled = true;
      return;
    }
    el.keysMsg.textContent = '';
    el.keysRotate.disabled = role === 'viewer';
    renderKeys(r.body);
  }

  el.keysRotate.addEventListener('click', async () => {
    const conf = await confirmAction('rotate_key', t('admin_confirm_rotate'), tx('admin_keys_rotate', 'Rotate the key'));
    if (!conf) return;
    el.keysRotate.disabled = true;
    el.keysMsg.textContent = t('admin_saving');
    const r = await api('POST', '/admin/api/keys/rotate', undefined, conf);
    el.keysRotate.disabled = role === 'viewer';
    if (!r.ok) { el.keysMsg.textContent = errorText(r.err); return; }
    el.keysMsg.textContent = tx('admin_keys_rotated', 'Key rotated.');
    renderKeys(r.body);
  });

  // ---------- queue history charts ----------

  const RANGE_DEFAULT = 3600;
  const HISTORY_POINTS = 360;
  const num2 = new Intl.NumberFormat(lang, { maximumFractionDigits: 2 });
  const HISTORY_CHARTS = [
    { key: 'waiting', title: tx('admin_h_waiting', 'Waiting and pre-queue'), series: [
      { label: tx('admin_h_waiting_s', 'Waiting'), cls: 's0', value: (p) => p.waiting },
      { label: tx('admin_h_prequeue_s', 'Pre-queue'), cls: 's1', value: (p) => p.prequeue }] },
    { key: 'admit', title: tx('admin_h_admit', 'Admitted per second'), series: [
      { label: tx('admin_h_admit_s', 'Admitted/s'), cls: 's0', value: (p) => p.admit_rate }] },
    { key: 'sse', title: tx('admin_h_sse', 'SSE connections'), series: [
      { label: tx('admin_h_sse_s', 'Connections'), cls: 's0', value: (p) => p.sse_connections }] },
    { key: 'wait', title: tx('admin_h_wait', 'Wait before admission (s)'), series: [
      { label: 'p50', cls: 's0', value: (p) => p.wait_p50_seconds },
      { label: 'p95', cls: 's1', value: (p) => p.wait_p95_seconds }], format: (v) => num2.format(v) + ' s' },
    { key: 'orders', title: tx('admin_h_orders', 'Orders per step'), series: [
      { label: tx('admin_h_orders_s', 'Orders'), cls: 's0', value: (p) => p.orders }] },
    { key: 'rate', title: tx('admin_h_rate', 'Rate setting (/s)'), series: [
      { label: tx('admin_h_rate_s', 'Rate'), cls: 's2', value: (p) => p.rate_per_second }],
      extra: (p) => (p.rate_reason ? tx('admin_h_reason', 'why: {reason}', { reason: p.rate_reason }) : '') },
  ];

  /** The step (s) for a range: a multiple of 10 s (of 60 s from a minute up, as the server
   *  wants) keeping the range within HISTORY_POINTS points. */
  function historyStep(range) {
    const s = Math.max(10, Math.ceil(range / HISTORY_POINTS / 10) * 10);
    return s > 60 ? Math.ceil(s / 60) * 60 : s;
  }

  function rfc3339(ms) { return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z'); }

  function rangeText(range) {
    return range < 3600 ? (range / 60) + ' min' : range < 86400 * 2 ? (range / 3600) + ' h' : (range / 86400) + ' d';
  }

  function setupHistory(entry) {
    const c = entry.card;
    const name = c.dataset.queue;
    const box = c.querySelector('[data-testid="history-charts"]');
    const h = { range: RANGE_DEFAULT, points: [], from: 0, to: 0, step: 10000, timer: null, seq: 0, charts: [],
      msg: c.querySelector('[data-testid="history-msg"]') };
    entry.hist = h;
    const group = c.querySelector('[data-testid="history-range"]');
    group.setAttribute('aria-label', tx('admin_h_range', 'History range of queue {name}', { name }));
    for (const b of group.querySelectorAll('[data-range]')) {
      b.dataset.baseName = tx('admin_h_show', 'Show the last {range}', { range: b.textContent.trim() });
      b.addEventListener('click', () => {
        h.range = Number(b.dataset.range);
        loadHistory(entry);
      });
    }
    for (const spec of HISTORY_CHARTS) {
      const fig = document.createElement('figure');
      fig.className = 'hchart';
      fig.dataset.chart = spec.key;
      const cap = document.createElement('figcaption');
      cap.id = 'q-' + name + '-h-' + spec.key;
      cap.append(spec.title);
      if (spec.series.length > 1) {
        for (const s of spec.series) {
          const k = cell('span', s.label, 'legend ' + s.cls);
          cap.append(' ', k);
        }
      }
      const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
      svg.setAttribute('class', 'hchart-svg');
      svg.setAttribute('role', 'img');
      svg.setAttribute('tabindex', '0');
      // Named from the start: the history may take a while to come (or not come at all).
      svg.setAttribute('aria-label', tx('admin_of_queue', '{what} of queue {name}', { what: spec.title, name }));
      svg.dataset.testid = 'chart-' + spec.key;
      const readout = cell('p', '', 'chart-readout small');
      readout.dataset.testid = 'readout-' + spec.key;
      readout.setAttribute('aria-live', 'polite');
      fig.append(cap, svg, readout);
      box.append(fig);
      h.charts.push({ spec, svg, readout });
    }
    loadHistory(entry);
  }

  function stopHistory(entry) {
    if (entry.hist) { clearTimeout(entry.hist.timer); entry.hist.seq++; }
  }

  /**
   * Reads the queue's history for the chosen range (aligned to its step, so a reload asks
   * for the same steps) and draws it; then again in 10 s (ranges up to 1 h) or a minute.
   */
  async function loadHistory(entry) {
    const h = entry.hist;
    const c = entry.card;
    const name = c.dataset.queue;
    clearTimeout(h.timer);
    const seq = ++h.seq;
    const step = historyStep(h.range);
    const now = Date.now() + serverSkew;
    const to = Math.ceil(now / (step * 1000)) * step * 1000;
    const from = to - h.range * 1000;
    for (const b of c.querySelectorAll('[data-range]')) {
      b.setAttribute('aria-pressed', Number(b.dataset.range) === h.range ? 'true' : 'false');
      nameControl(b, name);
    }
    const q = '?from=' + encodeURIComponent(rfc3339(from)) + '&to=' + encodeURIComponent(rfc3339(to)) + '&step=' + step;
    const r = await api('GET', '/admin/api/queues/' + encodeURIComponent(name) + '/history' + q);
    if (seq !== h.seq || el.dashboard.hidden) return;
    const again = h.range <= 3600 ? 10000 : 60000;
    if (!r.ok) {
      h.msg.dataset.state = 'error';
      h.msg.textContent = tx('admin_h_unavailable', 'History unavailable: {msg} Trying again in {n} s.', { msg: errorText(r.err), n: again / 1000 });
    } else {
      const b = r.body || {};
      h.step = (Number(b.step_seconds) || step) * 1000;
      h.from = Number.isFinite(Date.parse(b.from)) ? Date.parse(b.from) : from;
      h.to = Number.isFinite(Date.parse(b.to)) ? Date.parse(b.to) : to;
      h.points = (Array.isArray(b.points) ? b.points : []).map((p) => Object.assign({}, p, { t: Date.parse(p.t) }))
        .filter((p) => Number.isFinite(p.t));
      h.msg.dataset.state = 'ok';
      h.msg.textContent = h.points.length
        ? tx('admin_h_summary', 'Last {range}, one point per {step} s; gaps are steps with nothing recorded.', { range: rangeText(h.range), step: h.step / 1000 })
        : tx('admin_h_empty', 'Nothing recorded in the last {range} (an idle queue records nothing).', { range: rangeText(h.range) });
      c.querySelector('[data-testid="history"]').dataset.query = q;
      drawHistory(entry);
    }
    h.timer = setTimeout(() => loadHistory(entry), again);
  }

  function drawHistory(entry) {
    const h = entry.hist;
    if (!h || !h.to || !window.WaitRoomCharts) return;
    const name = entry.card.dataset.queue;
    for (const ch of h.charts) {
      ch.svg.setAttribute('aria-label', tx('admin_h_label', '{title} of queue {name}, last {range}: {n} points. Focus and use the arrow keys for values.',
        { title: ch.spec.title, name, range: rangeText(h.range), n: h.points.length }));
      window.WaitRoomCharts.lineChart(ch.svg, {
        from: h.from, to: h.to, step: h.step, points: h.points, series: ch.spec.series,
        format: ch.spec.format, extra: ch.spec.extra, readout: ch.readout,
      });
    }
  }

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

  window.addEventListener('resize', () => {
    drawAll();
    for (const entry of queueCards.values()) drawHistory(entry);
  });
  if (window.matchMedia) {
    const mq = window.matchMedia('(prefers-color-scheme: dark)');
    if (mq.addEventListener) mq.addEventListener('change', () => drawAll());
  }

  // The classifier of irreversible requests, read by the tests (a table of every request the
  // page makes against the kind it needs); it holds nothing secret and changes nothing.
  window.WaitRoomAdmin = Object.freeze({ confirmKind, kinds: Object.keys(CONFIRM_KINDS) });

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

  /**
   * The sign-in link a server that made its own token prints on the terminal
   * (/admin#token=…) signs in at once. A browser never sends the fragment to the server,
   * so the token is in no access log; it is removed from the address here, so history
   * and bookmarks do not keep it either. A wrong token meets the usual 401 → sign-in form.
   */
  function takeLinkToken() {
    const m = /(?:^#|&)token=([^&]*)/.exec(window.location.hash || '');
    if (!m) return '';
    try { window.history.replaceState(null, '', window.location.pathname + window.location.search); } catch (_) { /* ignore */ }
    try { return decodeURIComponent(m[1]).trim(); } catch (_) { return ''; }
  }

  const linked = takeLinkToken();
  if (linked) saveToken(linked);
  token = linked || loadToken();
  if (token) showDashboard();
  else { el.login.hidden = false; el.dashboard.hidden = true; }
})();
