/*
 * waitroom.js — the embeddable WaitRoom client. Plain ES2020, no build step,
 * no dependencies; works under `script-src 'self'`.
 *
 *   const room = WaitRoom.join({
 *     queue: 'demo',                 // required, [A-Za-z0-9_-]{1,64}
 *     baseUrl: '',                   // optional, '' = this origin
 *     onJoin(j)      {},             // join response: {ticket?, queue, state, position, waiting, eta_seconds, …}
 *     onPrequeue(q)  {},             // before a scheduled start: {starts_at, starts_at_ms, prequeue_size,
 *                                    //   draw_id, offset_ms, server_time}; starts_at_ms is on this
 *                                    //   machine's clock (server clock − offset_ms), for countdowns
 *     onPosition(p)  {},             // {position, ahead, waiting, eta_seconds, rate_per_second, paused,
 *                                    //   sold_out, server_time, tick}; position null in a lottery
 *                                    //   (method random): only `waiting` is known
 *     onSoldOut(s)   {},             // {sold_out: true|false, server_time}: the queue sold out (the
 *                                    //   place is kept) or stock came back
 *     onClosed(c)    {},             // {reason: 'ended', server_time}: the sale ended, places are
 *                                    //   dropped; the room closes (no reconnect, no re-join)
 *     onAdmitted(a)  {},             // {token, token_expires_at, expires_at_ms, redirect, server_time}
 *     onExpired(e)   {},             // {reason: 'server' | 'local'}
 *     onLeft()       {},             // the ticket left the line (this tab or another)
 *     onState(s)     {},             // 'connecting' | 'live' | 'reconnecting' | 'closed'
 *     onPing(p)      {},             // {server_time, interval_ms}: the stream's heartbeat (every 15 s
 *                                    //   by default); interval_ms is the shortest gap seen between two
 *                                    //   pings (null until two came), for a page's "stale" detection
 *     onError(err)   {},             // {status, code, message, retryAfter, retryIn, fatal}
 *     onPolling(p)   {},             // {polling: true, reason: 'too_many_streams', interval_ms,
 *                                    //   retry_stream_ms}: this address holds as many streams as
 *                                    //   the instance allows (WR_STREAMS_PER_IP), so the room polls
 *                                    //   /status every interval_ms instead (the place is kept, the
 *                                    //   callbacks above still fire) and tries the stream again
 *                                    //   every retry_stream_ms; {polling: false} once it streams
 *     invite: 'code',                // optional invite code, sent in the join body
 *     onPow(p)       {},             // proof of work: {state: 'solving' | 'solved' | 'retrying',
 *                                    //   difficulty, hashes, expected, ms}
 *     powWorkerUrl: '',              // optional; default baseUrl + '/static/pow-worker.js'
 *     streamRetryMs: 30000,          // optional; while polling for the stream cap, how often to
 *                                    //   ask for a stream again (at least 1000)
 *   });
 *   room.leave();  // DELETE the ticket (give up the place), then close
 *   room.close();  // stop listening; the place is kept (for a grace period)
 *
 *   // Across origins (baseUrl on another origin, allowed by the queue's
 *   // allowed_origins): the ticket travels as Authorization: Bearer and
 *   // ?ticket= on the stream, kept in this page's localStorage; no cookie.
 *   WaitRoom.ticket('demo', {baseUrl});             // the ticket, for your order request
 *   // The redirect flow: send the buyer to the room, get them back with a token.
 *   location.href = WaitRoom.redirectUrl({baseUrl, queue: 'demo', returnTo: location.href});
 *   const token = WaitRoom.takeReturnedToken();     // on return: #wr_token=…, removed from the URL
 *
 * What it does: POST /api/queues/{queue}/join (the HttpOnly `wr_ticket_<queue>`
 * cookie identifies the caller; 201 = new place, 200 = same place again),
 * then one EventSource on /api/queues/{queue}/stream. Only one tab per queue
 * holds that EventSource (a Web Lock, else an election over
 * BroadcastChannel); it re-broadcasts every event on BroadcastChannel
 * 'wr-<queue>' so other tabs follow without a connection of their own
 * (browsers allow only 6 HTTP/1.1 connections per origin).
 *
 * Proof of work: when the queue asks for one (428 pow_required, which carries a
 * challenge), the challenge is solved in a Web Worker (pow-worker.js) while
 * onPow reports progress ({hashes} tried of about {expected} = 2^difficulty),
 * and the join is sent again with {"pow":{"challenge","nonce"}}. A refused
 * proof (422 pow_invalid: expired, or used already) gets a new challenge from
 * POST /api/queues/{queue}/challenge, at most POW_RETRIES times; then onError
 * with fatal: true. A page on another origin than baseUrl cannot start a worker
 * from it: the script is then fetched and run from a blob: URL (the page's CSP
 * must allow worker-src blob:), or host a copy and pass powWorkerUrl.
 *
 * Drop day: before a queue's scheduled start a join answers state "prequeue"
 * (position null, starts_at, prequeue_size, draw_id) and the stream sends
 * `prequeue` events; at the start a `position` with the drawn place follows.
 * Every event's server_time sets the clock offset (server − this machine), so
 * countdowns are right when this machine's clock is not. `ping` events keep
 * the offset fresh and show the stream is alive: once they come, a stream
 * silent for three of their intervals is reopened. `sold_out` keeps the place;
 * `closed` ends the sale for good. A join refused with 423 sold_out,
 * queue_ended or queue_closed is final (onError with fatal: true, no retry).
 *
 * The per-address stream cap: EventSource cannot read why a stream was refused, so
 * when one fails for good the room asks with HEAD on the stream's URL; 429 with
 * X-RateLimit-Scope: ip is the cap (too_many_streams), and its Retry-After is the
 * polling interval (the status route's rate limit). The room then polls GET /status at
 * that interval — each answer becomes the same position/prequeue/admitted events — and
 * every streamRetryMs (30 s, ± 20 %) asks with HEAD again, going back to the stream once the
 * address has a stream to spare. onPolling says when this happens.
 *
 * On admission the token is kept in sessionStorage under 'wr_token:<queue>'
 * ({token, expires_at, expires_at_ms}); it never goes into a URL. The order
 * page reads it back with WaitRoom.getToken(queue).
 */
(function (global) {
  'use strict';

  const QUEUE_RE = /^[A-Za-z0-9_-]{1,64}$/;
  const TOKEN_PREFIX = 'wr_token:';
  const MAX_BACKOFF_MS = 30000;
  const POW_RETRIES = 2; // new challenges after 422 pow_invalid before giving up
  const POW_ROUNDS = 5;  // challenges solved for one place at most (a live raise asks again)
  const PING_SILENCE = 3;              // missed ping intervals after which the stream is reopened
  const MIN_SILENCE_MS = 20000;        // never reopen a stream quicker than this
  const STREAM_RETRY_MS = 30000;       // while polling for the stream cap: ask for a stream this often
  // Events the stream delivers and the holder re-broadcasts to the other tabs.
  const STREAM_EVENTS = ['position', 'admitted', 'expired', 'prequeue', 'sold_out', 'closed', 'ping'];

  // ---------- small shared helpers (also used by the bundled pages) ----------

  /** Seconds from a Retry-After header (delta-seconds or HTTP date); null if absent. */
  function parseRetryAfter(value) {
    if (value == null || value === '') return null;
    const n = Number(value);
    if (Number.isFinite(n)) return Math.max(0, n);
    const when = Date.parse(value);
    if (Number.isFinite(when)) return Math.max(0, Math.ceil((when - Date.now()) / 1000));
    return null;
  }

  /**
   * Reads the API's error shape {"error":{"code","message"}} from a failed
   * response. Never throws.
   */
  async function readError(res) {
    let code = 'http_' + res.status;
    let message = res.statusText || 'HTTP ' + res.status;
    let field;
    try {
      const body = await res.json();
      if (body && body.error) {
        code = body.error.code || code;
        message = body.error.message || message;
        field = body.error.field;
      }
    } catch (_) { /* not JSON: keep the status */ }
    return {
      status: res.status,
      code,
      message,
      field, // the input a 422 is about, when it is one

      retryAfter: parseRetryAfter(res.headers.get('Retry-After')),
      scope: res.headers.get('X-RateLimit-Scope') || undefined,
    };
  }

  /**
   * Delay before retrying after a 429/503: the server's Retry-After (at least
   * 1 s) plus random jitter so that many clients told the same number do not
   * come back in the same instant.
   */
  function retryDelayMs(retryAfterSeconds) {
    const base = Math.max(1, retryAfterSeconds == null ? 2 : retryAfterSeconds) * 1000;
    return Math.round(base + Math.random() * Math.min(base, 3000));
  }

  /** Exponential backoff with full jitter for the n-th (0-based) failure. */
  function backoffMs(attempt) {
    const cap = Math.min(MAX_BACKOFF_MS, 1000 * Math.pow(2, Math.min(attempt, 10)));
    return Math.round(cap / 2 + Math.random() * (cap / 2));
  }

  let cachedMessages = null;
  /** UI strings the page embedded as JSON in #wr-messages (empty object if none). */
  function messages() {
    if (cachedMessages) return cachedMessages;
    cachedMessages = {};
    const el = typeof document !== 'undefined' && document.getElementById('wr-messages');
    if (el) {
      try { cachedMessages = JSON.parse(el.textContent) || {}; } catch (_) { /* keep empty */ }
    }
    return cachedMessages;
  }

  /** t('stock_left', {n: 3}) → the page's string for that key with {n} replaced. */
  function t(key, vars) {
    const s = messages()[key];
    const text = typeof s === 'string' ? s : key;
    if (!vars) return text;
    return text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
  }

  /**
   * tn('stock_left', 3, {n: '3'}) → t() of the plural variant for the count 3 in the
   * page's language: 'stock_left.few' when Intl.PluralRules picks "few" and the page
   * has that key, else the base key (the "other" text). Keys listed in ORDINAL_KEYS
   * (the place in line) choose by the ordinal rules: 'pos_number.one' → "1st".
   */
  const ORDINAL_KEYS = { pos_number: true };
  const pluralRules = {};
  function tn(key, count, vars) {
    const lang = (typeof document !== 'undefined' && document.documentElement.lang) || 'en';
    const type = ORDINAL_KEYS[key] ? 'ordinal' : 'cardinal';
    let category = 'other';
    try {
      const id = lang + ':' + type;
      pluralRules[id] = pluralRules[id] || new Intl.PluralRules(lang, { type });
      category = pluralRules[id].select(Math.abs(Number(count)));
    } catch (_) { /* no Intl.PluralRules: the base text */ }
    const variant = key + '.' + category;
    return t(category !== 'other' && typeof messages()[variant] === 'string' ? variant : key, vars);
  }

  /** English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 23rd, 111th. */
  function ordinal(n) {
    const v = Math.abs(n) % 100;
    if (v >= 11 && v <= 13) return n + 'th';
    switch (v % 10) {
      case 1: return n + 'st';
      case 2: return n + 'nd';
      case 3: return n + 'rd';
      default: return n + 'th';
    }
  }

  function safeStorage() {
    try {
      const s = global.sessionStorage;
      const probe = '__wr_probe__';
      s.setItem(probe, '1');
      s.removeItem(probe);
      return s;
    } catch (_) {
      return null; // private mode, disabled storage: work without it
    }
  }

  // ---------- admission token in sessionStorage ----------

  function saveToken(queue, token, expiresAt, skewMs) {
    const s = safeStorage();
    if (!s || !token) return;
    const server = Date.parse(expiresAt);
    const rec = {
      token,
      expires_at: expiresAt || null,
      // Expiry on this machine's clock: the server's time minus the skew.
      expires_at_ms: Number.isFinite(server) ? server - (skewMs || 0) : null,
    };
    s.setItem(TOKEN_PREFIX + queue, JSON.stringify(rec));
  }

  /**
   * The admission token stored for queue: {token, expires_at, expires_at_ms}
   * or null when none is stored or it has expired (then it is removed).
   */
  function getToken(queue) {
    const s = safeStorage();
    if (!s) return null;
    let rec = null;
    try { rec = JSON.parse(s.getItem(TOKEN_PREFIX + queue) || 'null'); } catch (_) { rec = null; }
    if (!rec || typeof rec.token !== 'string' || !rec.token) return null;
    if (typeof rec.expires_at_ms === 'number' && rec.expires_at_ms <= Date.now()) {
      s.removeItem(TOKEN_PREFIX + queue);
      return null;
    }
    return rec;
  }

  /** Forgets the stored token of queue (after a successful order, or expiry). */
  function clearToken(queue) {
    const s = safeStorage();
    if (s) s.removeItem(TOKEN_PREFIX + queue);
  }

  /** Only same-origin paths may be followed; anything else falls back. */
  function safeRedirect(redirect, queue) {
    if (typeof redirect === 'string' && /^\/(?![/\\])/.test(redirect)) return redirect;
    return '/q/' + encodeURIComponent(queue) + '/order';
  }

  function parseJSON(text) {
    try { return JSON.parse(text); } catch (_) { return null; }
  }

  // ---------- the room ----------

  class Room {
    constructor(opts) {
      if (!opts || !QUEUE_RE.test(opts.queue || '')) {
        throw new TypeError('WaitRoom.join: queue must be 1-64 characters from A-Z a-z 0-9 _ -');
      }
      this.queue = opts.queue;
      this.base = String(opts.baseUrl || '').replace(/\/+$/, '');
      this.cb = opts;
      this.crossOrigin = false;
      if (this.base) {
        try { this.crossOrigin = new URL(this.base, global.location.href).origin !== global.location.origin; } catch (_) { /* same */ }
      }
      // Across origins the ticket travels with the client (Bearer, ?ticket= on the stream),
      // never as a third-party cookie: browsers drop those.
      this.credentials = this.crossOrigin ? 'omit' : 'same-origin';
      this.state = '';
      this.closed = false;
      this.ended = false;     // expired or left: no automatic re-join
      this.leader = false;
      this.es = null;
      this.bc = null;
      this.timers = new Set();
      this.joinAttempt = 0;
      this.streamFailures = 0;
      this.skewMs = 0;
      this.last = { state: '', position: null, admitted: null, prequeue: null, soldOut: false };
      this.skewKnown = false; // skewMs measured from a server_time (else from a Date header, or 0)
      this.pingGapMs = 0;     // the server's ping interval, once two pings were seen
      this.lastPingAt = 0;
      this.pingSeenAt = 0;    // when the last ping reached this tab (own stream or the holder's)
      this.pingEveryMs = 0;   // the shortest gap seen between two pings in this tab
      this.silenceTimer = null;
      this.admittedToken = '';
      this.expiryTimer = null;
      this.electing = false;
      this.mode = '';
      this.id = Math.random().toString(36).slice(2) + Date.now().toString(36);
      this.invite = typeof opts.invite === 'string' ? opts.invite.slice(0, 128) : '';
      this.powSolution = null; // {challenge, nonce}: sent with the next join
      this.powRetries = 0;
      this.powRounds = 0;
      this.worker = null;
      this.workerUrl = opts.powWorkerUrl || this.base + '/static/pow-worker.js';
      this.polling = null;    // {interval_ms, retryAt}: polling /status for the stream cap
      this.pollTimer = 0;
      this.pollBusy = false;
      this.streamRetryMs = Math.max(1000, Number(opts.streamRetryMs) || STREAM_RETRY_MS);
    }

    // --- public ---

    /** Leaves the line: DELETE the ticket, tell the other tabs, close. */
    async leave() {
      this.ended = true;
      let ok = true;
      try {
        const res = await fetch(this._url('/ticket'), { method: 'DELETE', credentials: this.credentials, headers: this._headers() });
        ok = res.ok || res.status === 404;
      } catch (_) {
        ok = false;
      }
      this._post({ type: 'left' });
      clearToken(this.queue);
      if (this.crossOrigin) storeTicket(this.base, this.queue, '');
      this.close();
      return ok;
    }

    /** Stops listening in this tab. The place in line is kept by the server. */
    close() {
      if (this.closed) return;
      this.closed = true;
      this._closeStream();
      this.timers.forEach((id) => clearTimeout(id));
      this.timers.clear();
      if (this.expiryTimer) clearTimeout(this.expiryTimer);
      if (this.silenceTimer) clearTimeout(this.silenceTimer);
      this._stopWorker();
      if (this.lockAbort) this.lockAbort.abort();
      if (this.releaseLock) this.releaseLock();
      if (this.leader) this._post({ type: 'bye', id: this.id });
      if (this.bc) { this.bc.close(); this.bc = null; }
      this._setState('closed', true);
    }

    /** Current time on the server's clock (ms), from the last event's server_time. */
    serverNow() { return Date.now() + this.skewMs; }

    // --- joining ---

    start() {
      this._setState('connecting');
      this._openChannel();
      this._join();
      return this;
    }

    _url(suffix) {
      return this.base + '/api/queues/' + encodeURIComponent(this.queue) + suffix;
    }

    /** Request headers: across origins, the ticket as a Bearer token. */
    _headers(extra) {
      const h = Object.assign({ Accept: 'application/json' }, extra || {});
      const ticket = this.crossOrigin ? storedTicket(this.base, this.queue) : '';
      if (ticket) h.Authorization = 'Bearer ' + ticket;
      return h;
    }

    _later(fn, ms) {
      const id = setTimeout(() => { this.timers.delete(id); if (!this.closed) fn(); }, ms);
      this.timers.add(id);
      return id;
    }

    async _join() {
      if (this.closed) return;
      let res;
      try {
        const init = { method: 'POST', credentials: this.credentials, headers: this._headers() };
        const body = {};
        if (this.powSolution) body.pow = this.powSolution;
        if (this.invite) body.invite = this.invite;
        if (Object.keys(body).length > 0) {
          init.body = JSON.stringify(body);
          init.headers['Content-Type'] = 'application/json';
        }
        res = await fetch(this._url('/join'), init);
      } catch (e) {
        return this._retryJoin({ status: 0, code: 'network', message: String(e && e.message || e) }, backoffMs(this.joinAttempt));
      }
      if (this.closed) return;
      if (res.status === 200 || res.status === 201) {
        const body = (await res.json().catch(() => null)) || {};
        if (this.crossOrigin && typeof body.ticket === 'string') storeTicket(this.base, this.queue, body.ticket);
        this.joinAttempt = 0;
        this.powSolution = null;
        this.powRetries = 0;
        this.powRounds = 0;
        this._clockFrom(body.server_time, res.headers.get('Date'));
        this._call('onJoin', Object.assign({ resumed: res.status === 200 }, body));
        this._place(body, false);
        if (!this.electing) this._elect();
        else if (this.leader && !this.es && !this.ended && !this.polling) this._openStream();
        else if (this.leader && this.polling && !this.pollTimer && !this.pollBusy) this._poll();
        return;
      }
      if (res.status === 428) {
        // A new place costs a proof of work; the answer carries the challenge.
        const body = await res.json().catch(() => null);
        this.powSolution = null;
        if (body && body.challenge && typeof body.challenge.challenge === 'string' && ++this.powRounds <= POW_ROUNDS) {
          this._solve(body.challenge);
          return;
        }
        return this._fatal({ status: 428, code: 'pow_required', message: (body && body.error && body.error.message) || 'Proof of work required.' });
      }
      const err = await readError(res);
      if (res.status === 401 && this.crossOrigin && storedTicket(this.base, this.queue) && !this.droppedTicket) {
        // A stored ticket the room no longer accepts (another secret): forget it, join anew.
        this.droppedTicket = true;
        storeTicket(this.base, this.queue, '');
        return this._join();
      }
      if (res.status === 422 && err.code === 'pow_invalid') {
        // Expired while solving, or used already: a new challenge, a couple of times.
        this.powSolution = null;
        if (this.powRetries++ < POW_RETRIES) {
          this._call('onPow', { state: 'retrying', attempt: this.powRetries });
          return this._newChallenge();
        }
        return this._fatal(err);
      }
      // too_many_places is final: this address already holds the queue's places_per_ip
      // places, and retrying would only add load (the 429's Retry-After is the contract's
      // rule for every 429, not an invitation).
      if ((res.status === 429 && err.code !== 'too_many_places') || res.status === 503) {
        return this._retryJoin(err, retryDelayMs(err.retryAfter));
      }
      if (res.status >= 500) {
        return this._retryJoin(err, backoffMs(this.joinAttempt));
      }
      // 404 queue_not_found, 423 queue_closed (closed, or the sale is not open), 423 sold_out,
      // 423 queue_ended, 429 too_many_places, 422 invite_invalid, other 4xx: retrying will not
      // help.
      this._fatal(err);
    }

    /**
     * A join or status answer as the stream's events: admitted, prequeue or position (and,
     * from status, expired). broadcast: the other tabs follow it too (a poll; a join's
     * answer is this tab's own).
     */
    _place(body, broadcast) {
      if (body.state === 'admitted' && body.token) {
        // Also a passthrough queue's join, which may admit at once.
        this._handle('admitted', { token: body.token, token_expires_at: body.token_expires_at }, broadcast);
      } else if (body.state === 'prequeue') {
        this._handle('prequeue', {
          starts_at: body.starts_at, prequeue_size: body.prequeue_size, draw_id: body.draw_id,
          sold_out: body.sold_out,
        }, broadcast);
      } else if (body.position != null || body.state === 'waiting') {
        // position is null in a lottery (method random): only the count is known.
        const p = {
          position: typeof body.position === 'number' ? body.position : null, waiting: body.waiting,
          eta_seconds: body.eta_seconds,
          rate_per_second: typeof body.rate_per_second === 'number' ? body.rate_per_second : body.admit_rate,
        };
        if (typeof body.paused === 'boolean') p.paused = body.paused;
        if (typeof body.sold_out === 'boolean') p.sold_out = body.sold_out;
        if (body.draw_id) p.draw_id = body.draw_id;
        this._handle('position', p, broadcast);
      } else if (broadcast && (body.state === 'expired' || body.state === 'used')) {
        this._handle('expired', {}, true);
      }
    }

    _fatal(err) {
      err.fatal = true;
      this._call('onError', err);
      this.close();
    }

    // --- proof of work ---

    /** Asks for a fresh challenge (after a refused proof), then solves it. */
    async _newChallenge() {
      if (this.closed) return;
      let res;
      try {
        res = await fetch(this._url('/challenge'), { method: 'POST', credentials: this.credentials, headers: this._headers() });
      } catch (e) {
        this.joinAttempt++;
        this._later(() => this._newChallenge(), backoffMs(this.joinAttempt));
        return;
      }
      if (this.closed) return;
      if (res.ok) {
        const c = await res.json().catch(() => null);
        if (c && typeof c.challenge === 'string') {
          this._solve(c);
          return;
        }
      }
      const err = await readError(res);
      if (res.status === 429 || res.status >= 500) {
        this.joinAttempt++;
        err.retryIn = Math.ceil(retryDelayMs(err.retryAfter) / 1000);
        this._call('onError', err);
        this._later(() => this._newChallenge(), err.retryIn * 1000);
        return;
      }
      this._fatal(err);
    }

    /** Solves challenge c ({challenge, difficulty, expires_at}) in a worker, then joins. */
    async _solve(c) {
      const difficulty = Math.max(0, Math.min(32, Number(c.difficulty) || 0));
      const expected = Math.pow(2, difficulty);
      const started = Date.now();
      const progress = (state, hashes) => this._call('onPow', { state, difficulty, hashes, expected, ms: Date.now() - started });
      progress('solving', 0);
      const solved = (nonce, hashes) => {
        this._stopWorker();
        this.powSolution = { challenge: c.challenge, nonce };
        progress('solved', hashes);
        this._join();
      };
      if (difficulty === 0) return solved('0', 1);
      let w;
      try {
        w = await this._startWorker();
      } catch (e) {
        return this._fatal({ status: 0, code: 'pow_unsupported', message: String((e && e.message) || e) });
      }
      if (this.closed) { w.terminate(); return; }
      this._stopWorker();
      this.worker = w;
      w.onmessage = (e) => {
        const m = e.data || {};
        if (this.closed || this.worker !== w) return;
        if (m.type === 'progress') progress('solving', m.hashes);
        else if (m.type === 'done') solved(m.nonce, m.hashes);
        else this._fatal({ status: 0, code: 'pow_unsupported', message: m.message || 'The proof of work failed.' });
      };
      w.onerror = (e) => {
        if (this.worker !== w) return;
        this._fatal({ status: 0, code: 'pow_unsupported', message: (e && e.message) || 'The proof-of-work worker failed.' });
      };
      w.postMessage({ challenge: c.challenge, difficulty });
    }

    /** A Worker running pow-worker.js: from its URL, or from a blob: across origins. */
    async _startWorker() {
      if (typeof global.Worker !== 'function') throw new Error('Web Workers are not available');
      try {
        return new global.Worker(this.workerUrl);
      } catch (e) {
        // A worker script must be same-origin with the page: fetch it and run it from a blob.
        const res = await fetch(this.workerUrl, { credentials: 'omit' });
        if (!res.ok) throw e;
        const blob = new Blob([await res.text()], { type: 'text/javascript' });
        const url = URL.createObjectURL(blob);
        try { return new global.Worker(url); } finally { setTimeout(() => URL.revokeObjectURL(url), 10000); }
      }
    }

    _stopWorker() {
      if (this.worker) {
        this.worker.terminate();
        this.worker = null;
      }
    }

    _retryJoin(err, delay) {
      this.joinAttempt++;
      err.retryIn = Math.ceil(delay / 1000);
      err.fatal = false;
      this._call('onError', err);
      this._later(() => this._join(), delay);
    }

    // --- who holds the stream ---

    _openChannel() {
      if (typeof global.BroadcastChannel !== 'function') return;
      this.bc = new global.BroadcastChannel('wr-' + this.queue);
      this.bc.onmessage = (e) => this._onPeer(e.data || {});
    }

    _post(msg) {
      if (this.bc) {
        try { this.bc.postMessage(msg); } catch (_) { /* channel closed */ }
      }
    }

    _elect() {
      if (this.electing || this.closed) return;
      this.electing = true;
      const locks = global.navigator && global.navigator.locks;
      if (locks && typeof locks.request === 'function' && this.bc) {
        this.mode = 'locks';
        this.lockAbort = typeof AbortController === 'function' ? new AbortController() : null;
        const opts = this.lockAbort ? { signal: this.lockAbort.signal } : {};
        locks.request('wr-stream-' + this.queue, opts, () => {
          if (this.closed) return undefined;
          // Hold the lock until this room closes (or the tab goes away).
          return new Promise((resolve) => {
            this.releaseLock = resolve;
            this._lead();
          });
        }).catch(() => { /* aborted on close */ });
        this._post({ type: 'hello', id: this.id });
      } else if (this.bc) {
        this.mode = 'channel';
        this._electByChannel();
      } else {
        this.mode = 'solo';
        this._lead();
      }
    }

    // Fallback when Web Locks are missing: the leader beats every second;
    // a tab that hears no beat for 3 s claims, and the lowest id wins a tie.
    _electByChannel() {
      this.lastBeat = 0;
      this.claimedAt = 0;
      const tick = () => {
        if (this.closed) return;
        if (this.leader) {
          this._post({ type: 'beat', id: this.id });
        } else if (Date.now() - this.lastBeat > 3000) {
          if (this.claimedAt && Date.now() - this.claimedAt > 400) {
            this.claimedAt = 0;
            this._lead();
            this._post({ type: 'beat', id: this.id });
          } else if (!this.claimedAt) {
            this.claimedAt = Date.now();
            this._post({ type: 'claim', id: this.id });
          }
        }
        this._later(tick, this.claimedAt ? 450 : 1000);
      };
      this._post({ type: 'hello', id: this.id });
      this._later(tick, 300 + Math.random() * 300);
    }

    _onPeer(msg) {
      if (this.closed || !msg || msg.id === this.id) return;
      switch (msg.type) {
        case 'hello':
          if (this.leader) {
            this._post({
              type: 'snapshot', id: this.id, state: this.state, position: this.last.position, admitted: this.last.admitted,
              prequeue: this.last.prequeue, soldOut: this.last.soldOut, skewMs: this.skewKnown ? this.skewMs : null,
              polling: this.polling ? { polling: true, reason: 'too_many_streams', interval_ms: this.polling.interval_ms, retry_stream_ms: this.streamRetryMs } : null,
            });
          }
          break;
        case 'snapshot':
          if (!this.leader) {
            // The holder's clock offset (same machine): its stored events' server_time is old.
            if (typeof msg.skewMs === 'number' && !this.skewKnown) this.skewMs = msg.skewMs;
            if (msg.prequeue && !msg.position && !msg.admitted) this._handle('prequeue', msg.prequeue, false, true);
            if (msg.position) this._handle('position', msg.position, false, true);
            if (msg.soldOut && !this.last.soldOut && !msg.admitted) this._handle('sold_out', {}, false, true);
            if (msg.admitted) this._handle('admitted', msg.admitted, false, true);
            if (msg.state) this._setState(msg.state);
            // A new holder that streams sends polling null: a follower that showed polling stops.
            this._call('onPolling', msg.polling || { polling: false });
            this.lastBeat = Date.now();
          }
          break;
        case 'event':
          if (!this.leader && STREAM_EVENTS.includes(msg.name)) this._handle(msg.name, msg.data, false);
          break;
        case 'state':
          if (!this.leader && msg.state !== 'closed') this._setState(msg.state);
          break;
        case 'left':
          this.ended = true;
          clearToken(this.queue);
          this._call('onLeft');
          this.close();
          break;
        case 'beat':
          this.lastBeat = Date.now();
          this.claimedAt = 0;
          if (this.leader && this.mode === 'channel' && msg.id < this.id) this._stepDown();
          break;
        case 'claim':
          if (this.leader) this._post({ type: 'beat', id: this.id });
          else if (this.claimedAt && msg.id < this.id) this.claimedAt = 0;
          break;
        case 'polling':
          if (!this.leader && msg.info) this._call('onPolling', msg.info);
          break;
        case 'bye':
          this.lastBeat = 0;
          break;
        default:
      }
    }

    _stepDown() {
      this.leader = false;
      this._closeStream();
      if (this.pollTimer) { clearTimeout(this.pollTimer); this.timers.delete(this.pollTimer); this.pollTimer = 0; }
      this.polling = null;
    }

    _lead() {
      if (this.closed) { if (this.releaseLock) this.releaseLock(); return; }
      this.leader = true;
      if (!this.ended) this._openStream();
    }

    // --- the stream (leader only) ---

    _openStream() {
      this._closeStream();
      if (this.closed || this.ended) return;
      this.lastPingAt = 0; // the interval is measured on one connection
      const url = this._streamUrl();
      const es = new global.EventSource(url);
      this.es = es;
      // Live from the first event, not from the open: an instance at its budget answers a
      // stream with only a retry and ends it, which opens and closes without an event.
      let heard = false;
      const live = () => {
        if (heard) return;
        heard = true;
        this.streamFailures = 0;
        this._stopPolling();
        this._setState('live');
      };
      es.onerror = () => {
        if (this.es !== es) return;
        if (es.readyState === global.EventSource.CONNECTING) {
          // The browser reconnects by itself (after the server's retry:); live again at the
          // first event of the new connection.
          heard = false;
          this._setState('reconnecting');
          return;
        }
        // CLOSED: the server answered with an error status (429: this address holds the
        // streams it may; 401, 404: the place was lost) or not an event stream. The cap
        // is polled through; otherwise join again after a pause — a still-valid ticket gets
        // its old place back.
        es.close();
        this.es = null;
        if (this.ended || this.closed) return;
        this._setState('reconnecting');
        this._streamCap(url).then((every) => {
          if (this.ended || this.closed || this.es || !this.leader) return;
          if (every) {
            this._startPolling(every);
            return;
          }
          const delay = backoffMs(this.streamFailures++);
          this._later(() => this._join(), delay);
        });
      };
      // The server says when it lost Redis (updates paused) and when it is back.
      es.addEventListener('state', (e) => {
        if (this.es !== es) return;
        heard = true; // the server says itself whether it is live
        const d = parseJSON(e.data) || {};
        if (d.state === 'reconnecting' || d.state === 'live') this._setState(d.state);
      });
      for (const name of STREAM_EVENTS) {
        es.addEventListener(name, (e) => {
          if (this.es !== es) return;
          live();
          this._heard(es, name);
          this._handle(name, parseJSON(e.data) || {}, true);
        });
      }
    }

    // --- the per-address stream cap: polling /status instead (leader only) ---

    /**
     * Asks with HEAD whether the stream at url is refused for the per-address stream cap
     * (429, X-RateLimit-Scope: ip). Resolves to the polling interval in ms (the 429's
     * Retry-After), or 0 when it is not that (a stream would open, the place is gone, a
     * network error).
     */
    async _streamCap(url) {
      try {
        const res = await fetch(url, { method: 'HEAD', credentials: this.credentials, headers: { Accept: 'text/event-stream' } });
        if (res.status !== 429 || res.headers.get('X-RateLimit-Scope') !== 'ip') return 0;
        return Math.max(1, parseRetryAfter(res.headers.get('Retry-After')) || 1) * 1000;
      } catch (_) {
        return 0;
      }
    }

    _startPolling(everyMs) {
      const first = !this.polling;
      this.polling = { interval_ms: everyMs, retryAt: Date.now() + this._retryIn() };
      if (first) {
        const info = { polling: true, reason: 'too_many_streams', interval_ms: everyMs, retry_stream_ms: this.streamRetryMs };
        this._post({ type: 'polling', id: this.id, info });
        this._call('onPolling', info);
      }
      if (!this.pollTimer && !this.pollBusy) this._poll();
    }

    /** streamRetryMs ± 20 %: pages of one address refused together do not all ask again at once. */
    _retryIn() {
      return Math.round(this.streamRetryMs * (0.8 + 0.4 * Math.random()));
    }

    _stopPolling() {
      if (this.pollTimer) { clearTimeout(this.pollTimer); this.timers.delete(this.pollTimer); this.pollTimer = 0; }
      if (!this.polling) return;
      this.polling = null;
      const info = { polling: false };
      this._post({ type: 'polling', id: this.id, info });
      this._call('onPolling', info);
    }

    /** One look at GET /status, then the next one (or the stream, once it has room). */
    async _poll() {
      this.pollTimer = 0;
      if (this.pollBusy || this.closed || this.ended || !this.polling || this.es || !this.leader) return;
      this.pollBusy = true;
      try {
        await this._pollOnce();
      } finally {
        this.pollBusy = false;
      }
    }

    async _pollOnce() {
      if (Date.now() >= this.polling.retryAt) {
        this.polling.retryAt = Date.now() + this._retryIn();
        const url = this._streamUrl();
        const every = await this._streamCap(url);
        if (this.closed || this.ended || !this.polling) return;
        if (!every) {
          this._openStream(); // polling stops at its first event; a refusal polls again
          return;
        }
        this.polling.interval_ms = every;
      }
      let next = this.polling.interval_ms;
      try {
        const res = await fetch(this._url('/status'), { credentials: this.credentials, headers: this._headers() });
        if (this.closed || this.ended || !this.polling) return;
        if (res.ok) {
          const body = (await res.json().catch(() => null)) || {};
          if (this.closed || this.ended || !this.polling) return;
          this._clockFrom(body.server_time, res.headers.get('Date'));
          this.streamFailures = 0;
          this._setState('live');
          this._place(body, true);
        } else {
          const err = await readError(res);
          if (this.closed || this.ended || !this.polling) return;
          if (res.status === 423 && err.code === 'queue_ended') {
            this._handle('closed', { reason: 'ended' }, true);
            return;
          }
          if (res.status === 401 || res.status === 404) {
            // The place is gone (abandoned, another secret): join again, as after a stream's 404.
            this._stopPolling();
            this._later(() => this._join(), backoffMs(this.streamFailures++));
            return;
          }
          this._setState('reconnecting');
          next = res.status === 429 || res.status === 503 ? Math.max(next, retryDelayMs(err.retryAfter)) : Math.max(next, backoffMs(this.streamFailures++));
        }
      } catch (_) {
        if (this.closed || !this.polling) return;
        this._setState('reconnecting');
        next = Math.max(next, backoffMs(this.streamFailures++));
      }
      if (this.closed || this.ended || !this.polling || this.pollTimer) return;
      // Admitted: only the token's expiry is left to hear (the local timer hears it too).
      if (this.last.admitted) next = Math.max(next, 5000);
      this.pollTimer = this._later(() => this._poll(), next);
    }

    /** The stream's URL; across origins it carries the ticket (EventSource sends no headers). */
    _streamUrl() {
      const url = this._url('/stream');
      const ticket = this.crossOrigin ? storedTicket(this.base, this.queue) : '';
      return ticket ? url + '?ticket=' + encodeURIComponent(ticket) : url;
    }

    _closeStream() {
      if (this.silenceTimer) { clearTimeout(this.silenceTimer); this.silenceTimer = null; }
      if (this.es) {
        this.es.close();
        this.es = null;
      }
    }

    /**
     * Watches the stream for silence. A server that sends `ping` events (every 15 s by
     * default) is heard at least that often; once two pings have shown the interval, a
     * stream silent for PING_SILENCE intervals is dead (a proxy or NAT dropped it without
     * closing it) and is opened again. A server without ping events is never timed out.
     */
    _heard(es, name) {
      const now = Date.now();
      if (name === 'ping') {
        if (this.lastPingAt) {
          const gap = now - this.lastPingAt;
          if (gap > 0) this.pingGapMs = this.pingGapMs ? Math.min(Math.max(this.pingGapMs, gap), 120000) : gap;
        }
        this.lastPingAt = now;
      }
      if (!this.pingGapMs) return;
      if (this.silenceTimer) clearTimeout(this.silenceTimer);
      this.silenceTimer = setTimeout(() => {
        this.silenceTimer = null;
        if (this.closed || this.es !== es) return;
        this.lastPingAt = 0;
        this._setState('reconnecting');
        this._openStream();
      }, Math.max(MIN_SILENCE_MS, PING_SILENCE * this.pingGapMs));
    }

    /**
     * Sets the clock offset from a server_time (RFC 3339 with ms), else, while no event has
     * given one, from an HTTP Date header (whole seconds; better than trusting this clock).
     */
    _clockFrom(serverTime, dateHeader) {
      const st = Date.parse(serverTime || '');
      if (Number.isFinite(st)) {
        this.skewMs = st - Date.now();
        this.skewKnown = true;
        return;
      }
      if (this.skewKnown || !dateHeader) return;
      const d = Date.parse(dateHeader);
      // The header is truncated to the second: add half a second on average.
      if (Number.isFinite(d)) this.skewMs = d + 500 - Date.now();
    }

    // --- events, from the stream or from another tab ---

    /** replay: a stored event (a snapshot from the holder): its server_time is not "now". */
    _handle(name, data, fromStream, replay) {
      if (this.closed || !data) return;
      if (data.server_time && !replay) this._clockFrom(data.server_time);
      if (fromStream) this._post({ type: 'event', id: this.id, name, data });
      if (name === 'position') {
        const p = Object.assign({}, data);
        if (typeof p.position === 'number') p.ahead = Math.max(0, p.position - 1);
        else p.position = null; // a lottery: no place number
        this.last.position = data;
        this.last.prequeue = null; // started
        this._call('onPosition', p);
        if (typeof data.sold_out === 'boolean') this._soldOut(data.sold_out, data.server_time);
      } else if (name === 'prequeue') {
        // Events carry starts_at and prequeue_size; the join also the draw id: keep it.
        const q = Object.assign({}, this.last.prequeue || {}, data);
        this.last.prequeue = q;
        const starts = Date.parse(q.starts_at || '');
        this._call('onPrequeue', Object.assign({}, q, {
          starts_at_ms: Number.isFinite(starts) ? starts - this.skewMs : null,
          offset_ms: this.skewMs,
        }));
        if (typeof data.sold_out === 'boolean') this._soldOut(data.sold_out, data.server_time);
      } else if (name === 'sold_out') {
        this._soldOut(true, data.server_time);
      } else if (name === 'closed') {
        // The sale ended (ends_at): places are dropped and the stream ends. No reconnect,
        // no re-join: the server would answer 204 and 423 queue_ended.
        if (this.ended) return;
        this.ended = true;
        this.last.position = null;
        this.last.prequeue = null;
        this._closeStream();
        this._call('onClosed', { reason: data.reason || 'ended', server_time: data.server_time });
        this.close();
      } else if (name === 'admitted') {
        this.last.admitted = data;
        this.last.prequeue = null;
        if (!data.token || data.token === this.admittedToken) return; // sent again on reconnect
        this.admittedToken = data.token;
        saveToken(this.queue, data.token, data.token_expires_at, this.skewMs);
        const rec = getToken(this.queue);
        const a = Object.assign({}, data, {
          redirect: safeRedirect(data.redirect, this.queue),
          expires_at_ms: rec ? rec.expires_at_ms : null,
        });
        this._armLocalExpiry(a.expires_at_ms);
        this._call('onAdmitted', a);
      } else if (name === 'expired') {
        this._expire('server');
      } else if (name === 'ping' && !replay) {
        // The interval: the shortest gap seen (a gap across a stall or a reconnect is longer,
        // never shorter); gaps under 250 ms are two tabs' copies, not the interval.
        const now = Date.now();
        if (this.pingSeenAt) {
          const gap = now - this.pingSeenAt;
          if (gap >= 250) this.pingEveryMs = this.pingEveryMs ? Math.min(this.pingEveryMs, gap) : gap;
        }
        this.pingSeenAt = now;
        this._call('onPing', { server_time: data.server_time, interval_ms: this.pingEveryMs || null });
      }
    }

    /** Tells onSoldOut when the queue's sold-out state changes. */
    _soldOut(on, serverTime) {
      if (this.last.soldOut === on) return;
      this.last.soldOut = on;
      this._call('onSoldOut', { sold_out: on, server_time: serverTime });
    }

    // The server sends `expired`, but a tab that slept through it still has
    // to find out: fire a little after the token's own expiry.
    _armLocalExpiry(expiresAtMs) {
      if (this.expiryTimer) clearTimeout(this.expiryTimer);
      if (typeof expiresAtMs !== 'number') return;
      const wait = Math.max(0, expiresAtMs - Date.now()) + 2000;
      this.expiryTimer = setTimeout(() => this._expire('local'), Math.min(wait, 2147483647));
    }

    _expire(reason) {
      if (this.ended || this.closed) return;
      this.ended = true;
      this.last.admitted = null;
      clearToken(this.queue);
      if (this.expiryTimer) clearTimeout(this.expiryTimer);
      this._call('onExpired', { reason });
      this.close();
    }

    _setState(state, force) {
      if (this.state === state) return;
      if (this.closed && !force) return;
      this.state = state;
      if (this.leader && state !== 'closed') this._post({ type: 'state', id: this.id, state });
      this._call('onState', state);
    }

    _call(name, arg) {
      const fn = this.cb[name];
      if (typeof fn !== 'function') return;
      try { fn.call(this, arg); } catch (e) { setTimeout(() => { throw e; }); }
    }
  }

  /**
   * One look at the caller's place without a stream: GET
   * /api/queues/{queue}/status. Resolves to the status JSON (same shape as
   * join), or rejects with the API error ({status, code, message, …}). When
   * the caller is admitted the token is stored like WaitRoom.join does, so a
   * page that lost its sessionStorage can recover it.
   */
  async function status(queue, opts) {
    if (!QUEUE_RE.test(queue || '')) throw new TypeError('WaitRoom.status: bad queue name');
    const base = String((opts && opts.baseUrl) || '').replace(/\/+$/, '');
    const cross = isCrossOrigin(base);
    const headers = { Accept: 'application/json' };
    const ticket = cross ? storedTicket(base, queue) : '';
    if (ticket) headers.Authorization = 'Bearer ' + ticket;
    const res = await fetch(base + '/api/queues/' + encodeURIComponent(queue) + '/status', {
      credentials: cross ? 'omit' : 'same-origin',
      headers,
    });
    if (!res.ok) throw await readError(res);
    const body = (await res.json().catch(() => null)) || {};
    if (body.state === 'admitted' && body.token) {
      const st = Date.parse(body.server_time);
      saveToken(queue, body.token, body.token_expires_at, Number.isFinite(st) ? st - Date.now() : 0);
    }
    return body;
  }

  // --- across origins ---

  function isCrossOrigin(base) {
    if (!base) return false;
    try { return new URL(base, global.location.href).origin !== global.location.origin; } catch (_) { return false; }
  }

  function ticketKey(base, queue) {
    let origin = '';
    try { origin = new URL(base, global.location.href).origin; } catch (_) { /* '' */ }
    return 'wr_ticket:' + origin + ':' + queue;
  }

  /** The ticket of a cross-origin room, kept by the page (shared by its tabs). */
  function storedTicket(base, queue) {
    try { return global.localStorage.getItem(ticketKey(base, queue)) || ''; } catch (_) { return ''; }
  }

  function storeTicket(base, queue, ticket) {
    try {
      if (ticket) global.localStorage.setItem(ticketKey(base, queue), ticket);
      else global.localStorage.removeItem(ticketKey(base, queue));
    } catch (_) { /* storage off: the ticket lives as long as the Room */ }
  }

  /**
   * The redirect flow, step 1: the address of the waiting page that sends the
   * buyer back to returnTo (default: this page) with the signed token in the
   * fragment. returnTo must be on one of the queue's allowed_origins.
   */
  function redirectUrl(opts) {
    if (!opts || !QUEUE_RE.test(opts.queue || '')) throw new TypeError('WaitRoom.redirectUrl: bad queue name');
    const base = String(opts.baseUrl || '').replace(/\/+$/, '');
    const back = opts.returnTo || global.location.href.split('#')[0];
    return base + '/q/' + encodeURIComponent(opts.queue) + '?return_to=' + encodeURIComponent(back);
  }

  /**
   * The redirect flow, step 2, on the shop's page: takes the token from
   * #wr_token=… and removes it from the address (history and bookmarks never
   * keep it). Returns the token, or null. Hand it to your backend, which
   * verifies it with the room's JWKS and redeems it once (POST /api/redeem).
   */
  function takeReturnedToken() {
    const h = global.location.hash || '';
    const m = /(?:^#|&)wr_token=([^&]+)/.exec(h);
    if (!m) return null;
    try { global.history.replaceState(null, '', global.location.pathname + global.location.search); } catch (_) { /* ignore */ }
    try { return decodeURIComponent(m[1]); } catch (_) { return null; }
  }

  /** Joins the line of opts.queue and follows it live. Returns the Room. */
  function join(opts) {
    return new Room(opts).start();
  }

  global.WaitRoom = Object.freeze({
    version: '1',
    join,
    status,
    getToken,
    clearToken,
    redirectUrl,
    takeReturnedToken,
    ticket: (queue, opts) => storedTicket(String((opts && opts.baseUrl) || '').replace(/\/+$/, ''), queue),
    util: Object.freeze({ parseRetryAfter, readError, retryDelayMs, backoffMs, messages, t, tn, ordinal, safeRedirect }),
  });
})(typeof window !== 'undefined' ? window : globalThis);
