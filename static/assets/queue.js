/*
 * queue.js — the waiting page /q/{queue}. Joins the line with WaitRoom.join
 * and renders position, people ahead, ETA, progress, the live admit rate and
 * the connection state; then the admission (countdown + link to the order
 * page) or the expiry (message + rejoin). Configuration comes from
 * data-queue on #room (and an invite code from ?invite= in the address; the
 * redirect flow's checked return_to from data-return-to: at admission the
 * buyer goes there with the signed token in the fragment, #wr_token=…);
 * strings from the page's #wr-messages block.
 *
 * Drop day: before a scheduled start the page shows the pre-queue (#prequeue):
 * a countdown to the start on the server's clock (WaitRoom measures the
 * offset from every event's server_time, so a wrong clock here does not
 * matter), the pre-queue's size, and the buyer's draw id (short, the full id
 * in a <details>, with a link to the published draw). At the start the first
 * position event switches to the live place (#waiting). In a lottery (method
 * random) there is no place number: #lottery says "You are in the draw — N
 * waiting". Sold out shows #sold-out over the line (the place is kept); the
 * end of the sale (#ended) stops everything.
 *
 * When the queue asks for a proof of work, WaitRoom solves it in a Web Worker
 * and this page shows the progress in #pow: a bar and "n of about N tries".
 * The bar shows 1 − e^(−tried/N), the chance that a solution is found by
 * now: it moves smoothly and never sits at 100 % while the worker is still
 * looking (the number of tries needed is random, N = 2^difficulty on average).
 *
 * Telling the truth (issue 16):
 *  - Paused: a position event with paused: true shows #paused-note ("Admission is
 *    paused — your place is kept") and the ETA says paused, never an estimate.
 *  - "updated N s ago" (#updated) ticks locally from the receipt time of the last
 *    event of any kind (position, prequeue, sold_out or the stream's ping: a ping says
 *    the numbers shown are still the server's).
 *  - Stale: no event for staleAfterMs() — 20 s, or 2 × the ping interval seen + 3 s
 *    when that is shorter (never under 5 s) — shows #stale ("Connection lost —
 *    reconnecting…"), dims the numbers (class is-stale on #room) and turns the
 *    connection label amber ("Connection lost"). The next event clears it. The stream
 *    itself is reopened by WaitRoom (three ping intervals, at least 20 s: a hiccup of a
 *    few seconds must not make 100,000 pages reconnect at once).
 *  - A lost place: a re-join that answers 201 (a new place) after this page had a place
 *    (the server lost the line, e.g. a restart with an in-memory Redis) is said in words
 *    in #lost-place with the new place; it is never a silent move to the back.
 *  - Your turn: an opt-in "Notify me" button (#notify-me; the Notification permission is
 *    asked only on that click; hidden when the API is missing or denied); at admission a
 *    notification (when opted in and granted), a short beep (WebAudio, only once a user
 *    gesture on this page allowed audio), a flashing title until the buyer looks, and
 *    the deadline in local time (#turn-deadline). With the queue's auto_redirect
 *    (data-auto-redirect) the page goes to the order page by itself; the token stays in
 *    sessionStorage (it enters a URL only in the redirect flow's #wr_token fragment).
 *
 * The end, before it happens: with ends_at set the server writes it as <time id="ends-at"
 * datetime="RFC 3339">, shown here in local time. When the upper end of the ETA range
 * (on the server's clock) reaches past it, #ends-warning (role alert: said once, in words)
 * warns that the sale may end before the turn; it goes away when the ETA comes back
 * before the end. A state that lets nobody in (sold out, paused) shows no rate or ETA.
 *
 * The per-address stream cap: when WaitRoom polls /status instead of streaming (onPolling),
 * #stream-limit says why and how often the numbers now update, and the connection label
 * says "Updating every N s"; both go when the stream is back.
 *
 * Leaving asks first (#leave-dialog, the dashboard's confirmation pattern: Cancel has the
 * focus, Escape cancels); without <dialog> support, window.confirm.
 */
(function () {
  'use strict';

  const lang = document.documentElement.lang || 'en';

  /** A time here, in this page's language: the time of day, with the date when not today. */
  function localTime(d, seconds) {
    const today = new Date(Date.now()).toDateString() === d.toDateString();
    const opts = today ? { hour: 'numeric', minute: '2-digit' } : { dateStyle: 'medium', timeStyle: 'short' };
    if (today && seconds) opts.second = '2-digit';
    try { return new Intl.DateTimeFormat(lang, opts).format(d); } catch (_) { return d.toLocaleString(lang); }
  }
  // The server writes times in UTC (RFC 3339, in datetime); they are shown in local time.
  for (const te of document.querySelectorAll('time.local-time[datetime]')) {
    const d = new Date(te.getAttribute('datetime'));
    if (isNaN(d)) continue;
    te.textContent = localTime(d, false);
    te.title = d.toISOString();
    te.dataset.local = 'true';
  }

  const W = window.WaitRoom;
  const roomEl = document.getElementById('room');
  if (!W || !roomEl) return; // unknown, ended or closed queue: the page says so, nothing to join

  const { t, tn } = W.util;
  const queue = roomEl.dataset.queue;
  const num = new Intl.NumberFormat(lang);
  const num1 = new Intl.NumberFormat(lang, { maximumFractionDigits: 1 });
  const START_KEY = 'wr_start:' + queue;
  const invite = (new URLSearchParams(window.location.search).get('invite') || '').slice(0, 128);
  const baseTitle = document.title;
  // The redirect flow's return_to, checked by the server against the queue's
  // allowed_origins (a refused one never reaches this script).
  const returnTo = roomEl.dataset.returnTo || '';
  const autoRedirect = roomEl.dataset.autoRedirect === 'true';
  const STALE_MAX_MS = 20000; // stale after 20 s of silence at most (the default ping is 15 s)
  const STALE_MIN_MS = 5000;  // never quicker: jitter is not a lost connection
  const AUTO_REDIRECT_MS = 1500; // time to hear "taking you to the order page"
  const NOTIFY_KEY = 'wr_notify:' + queue;
  const canNotify = typeof window.Notification === 'function' && typeof window.Notification.requestPermission === 'function';

  const $ = (id) => document.getElementById(id);
  const el = {
    conn: $('conn-state'),
    joining: $('joining'),
    prequeue: $('prequeue'),
    startsCountdown: $('starts-countdown'),
    startsAt: $('starts-at'),
    preDrawing: $('pre-drawing'),
    prequeueSize: $('prequeue-size'),
    drawIdBox: $('draw-id-box'),
    drawId: $('draw-id'),
    drawIdFull: $('draw-id-full'),
    prequeueLeave: $('prequeue-leave'),
    soldOut: $('sold-out'),
    ended: $('ended'),
    waiting: $('waiting'),
    positionLine: $('position-line'),
    lottery: $('lottery'),
    lotteryLine: $('lottery-line'),
    aheadStat: $('ahead-stat'),
    progressWrap: $('progress-wrap'),
    drawn: $('drawn'),
    drawnId: $('drawn-id'),
    admitted: $('admitted'),
    expired: $('expired'),
    left: $('left'),
    joinError: $('join-error'),
    joinErrorTitle: $('join-error-title'),
    joinErrorBody: $('join-error-body'),
    pow: $('pow'),
    powProgress: $('pow-progress'),
    powStatus: $('pow-status'),
    position: $('position'),
    ahead: $('ahead'),
    eta: $('eta'),
    waitingCount: $('waiting-count'),
    rate: $('rate'),
    progress: $('progress'),
    countdown: $('countdown'),
    goOrder: $('go-order'),
    rejoin: $('rejoin'),
    joinAgain: $('join-again'),
    leave: $('leave'),
    notice: $('notice'),
    announce: $('announce'),
    announceUrgent: $('announce-urgent'),
    stale: $('stale'),
    lostPlace: $('lost-place'),
    pausedNote: $('paused-note'),
    updated: $('updated'),
    notifyBox: $('notify-box'),
    notifyMe: $('notify-me'),
    notifyState: $('notify-state'),
    turnDeadline: $('turn-deadline'),
    endsLine: $('ends-line'),
    endsAt: $('ends-at'),
    endsWarning: $('ends-warning'),
    streamLimit: $('stream-limit'),
    leaveDialog: $('leave-dialog'),
    leaveOk: $('leave-ok'),
    leaveCancel: $('leave-cancel'),
  };
  const endsMs = el.endsAt ? Date.parse(el.endsAt.getAttribute('datetime') || '') : NaN;
  const sections = [el.joining, el.prequeue, el.waiting, el.admitted, el.expired, el.left, el.ended, el.joinError];
  const START_MILESTONES = [600, 300, 60, 10]; // seconds before the start that are announced

  let room = null;
  let generation = 0;
  let countdownTimer = null;
  let lastAnnounce = { at: 0, position: null };
  let lastRate = null;
  let phase = 'joining'; // joining | prequeue | waiting | admitted | expired | left | ended | error
  let soldOut = false;
  let drawId = '';
  let startsLocalMs = null; // the start on this machine's clock (server time − offset)
  let startTimer = null;
  let lastMilestone = Infinity;
  let lastMode = '';
  let connState = 'connecting';
  let lastEventAt = 0;     // when the last event (ping included) reached this page
  let pingEveryMs = null;  // the stream's ping interval, once two pings were seen
  let stale = false;
  let hadPlace = false;    // this room had a place (pre-queue or line) before
  let lostPending = false; // a re-join gave a new place: say so with the next position
  let paused = false;
  let notifyWanted = false;
  let askedHere = false;
  let audio = null;
  let flashTimer = null;
  let redirectTimer = null;
  let pollEvery = 0;       // seconds between status polls while the stream cap holds (0: streaming)

  function show(section) {
    for (const s of sections) s.hidden = s !== section;
    showSoldOut();
    showStale();
    renderNotify();
    showEnds();
    showStreamLimit();
  }

  // ----- the end of the sale, before it happens -----

  /** The end time shows while the buyer may still be let in: joining, pre-queue, line. */
  function showEnds() {
    const on = phase === 'joining' || inLine();
    if (el.endsLine) el.endsLine.hidden = !on || !Number.isFinite(endsMs);
    if (el.endsWarning && !(on && el.endsWarning.dataset.warned === 'true')) el.endsWarning.hidden = true;
  }

  /**
   * Warns when the ETA's upper end passes the end of the sale (seconds: the ETA; null when
   * there is none — paused, sold out, a lottery — and then no warning). The text is set when
   * the warning appears (role alert: said once), not at every new estimate.
   */
  function checkEnds(seconds) {
    if (!el.endsWarning || !Number.isFinite(endsMs)) return;
    const hi = seconds == null || !Number.isFinite(seconds) ? null : (seconds >= 30 ? seconds * 1.25 : seconds);
    const now = room && typeof room.serverNow === 'function' ? room.serverNow() : Date.now();
    let past = hi != null && phase === 'waiting' && now + hi * 1000 > endsMs;
    // Once shown, the warning stays until the ETA is clearly before the end (10 s), so an
    // estimate that wavers around the end does not make it come and go.
    if (!past && hi != null && phase === 'waiting' && el.endsWarning.dataset.warned === 'true' && now + hi * 1000 > endsMs - 10000) past = true;
    if (past && el.endsWarning.dataset.warned !== 'true') {
      el.endsWarning.textContent = t('ends_warning', { time: localTime(new Date(endsMs), false) });
      el.endsWarning.dataset.warned = 'true';
    } else if (!past && el.endsWarning.dataset.warned === 'true') {
      el.endsWarning.dataset.warned = 'false';
    }
    el.endsWarning.hidden = !past;
  }

  // ----- the per-address stream cap: polling instead, said in words -----

  function showStreamLimit() {
    const on = pollEvery > 0 && (phase === 'joining' || inLine());
    el.streamLimit.hidden = !on;
    el.streamLimit.dataset.every = on ? String(pollEvery) : '';
    if (on) {
      const text = t('stream_limited', { n: num.format(pollEvery) });
      if (el.streamLimit.textContent !== text) el.streamLimit.textContent = text;
    }
    renderConn();
  }

  function renderPolling(p) {
    pollEvery = p && p.polling ? Math.max(1, Math.round((p.interval_ms || 1000) / 1000)) : 0;
    showStreamLimit();
  }

  function inLine() { return phase === 'prequeue' || phase === 'waiting'; }

  // The sold-out banner belongs to the line (pre-queue or live), not to the other states.
  function showSoldOut() {
    el.soldOut.hidden = !(soldOut && (phase === 'prequeue' || phase === 'waiting'));
    roomEl.dataset.soldOut = soldOut ? 'true' : 'false';
  }

  function storage() {
    try { return window.sessionStorage; } catch (_) { return null; }
  }

  // ----- formatting -----

  // The place in line in the page's language: pos_number's variant by the ordinal rules
  // ("1st", "22nd", "23rd", "24th"; "23번"; "23."), the number in the page's digits.
  function positionText(n) {
    return tn('pos_number', n, { n: num.format(n), ord: num.format(n) });
  }

  // waitText is the waiting ETA: from 30 s on it is a range, −20 % … +25 % of the estimate
  // (rounded to 5 s, or to whole minutes from 2 min on), because the further the turn, the
  // more the rate can change before it comes (docs/API.md, "the ETA"); below that, etaText.
  function waitText(seconds, rate) {
    if (rate === 0 || seconds == null || !Number.isFinite(seconds) || seconds < 30) return etaText(seconds, rate);
    if (seconds < 120) {
      const lo = Math.max(5, Math.floor(seconds * 0.8 / 5) * 5), hi = Math.ceil(seconds * 1.25 / 5) * 5;
      return t('eta_range_seconds', { lo: num.format(lo), hi: num.format(hi) });
    }
    const lo = Math.max(1, Math.floor(seconds * 0.8 / 60)), hi = Math.ceil(seconds * 1.25 / 60);
    if (hi >= 120) return etaText(seconds, rate);
    return t('eta_range_minutes', { lo: num.format(lo), hi: num.format(hi) });
  }

  function etaText(seconds, rate) {
    if (rate === 0 || seconds == null || !Number.isFinite(seconds) || seconds < 0) return t('eta_unknown');
    const s = Math.round(seconds);
    if (s <= 1) return t('eta_soon');
    if (s < 60) return tn('eta_seconds', s, { n: num.format(s) });
    const m = Math.round(s / 60);
    if (m < 60) return tn('eta_minutes', m, { n: num.format(m) });
    return t('eta_hours', { h: num.format(Math.floor(s / 3600)), m: num.format(Math.round((s % 3600) / 60)) });
  }

  function clock(seconds) {
    const s = Math.max(0, Math.ceil(seconds));
    const m = Math.floor(s / 60);
    if (m >= 60) return Math.floor(m / 60) + ':' + String(m % 60).padStart(2, '0') + ':' + String(s % 60).padStart(2, '0');
    return m + ':' + String(s % 60).padStart(2, '0');
  }

  /** The start as a wall-clock time here (with the date when it is not today). */
  function startText(iso) {
    const d = new Date(iso);
    if (isNaN(d)) return '';
    const today = new Date(Date.now()).toDateString() === d.toDateString();
    const opts = today ? { hour: 'numeric', minute: '2-digit', second: '2-digit' }
      : { dateStyle: 'medium', timeStyle: 'medium' };
    try { return new Intl.DateTimeFormat(lang, opts).format(d); } catch (_) { return d.toLocaleString(lang); }
  }

  /** A time of day here, with seconds (the turn's deadline). */
  function timeOfDay(ms) {
    const d = new Date(ms);
    try { return new Intl.DateTimeFormat(lang, { hour: 'numeric', minute: '2-digit', second: '2-digit' }).format(d); } catch (_) { return d.toLocaleTimeString(lang); }
  }

  // ----- rendering -----

  function setConn(state) {
    connState = state;
    renderConn();
  }

  function renderConn() {
    let state = stale && inLine() && connState !== 'closed' ? 'stale' : connState;
    if (state === 'live' && pollEvery > 0) state = 'polling';
    el.conn.dataset.state = state;
    el.conn.textContent = state === 'polling' ? t('conn_polling', { n: num.format(pollEvery) }) : t('conn_' + state);
  }

  // ----- freshness: "updated N s ago" and the stale state -----

  function staleAfterMs() {
    if (!pingEveryMs) return STALE_MAX_MS;
    return Math.min(STALE_MAX_MS, Math.max(STALE_MIN_MS, 2 * pingEveryMs + 3000));
  }

  /** An event arrived: the numbers are fresh. */
  function heard() {
    lastEventAt = Date.now();
    if (stale) setStale(false);
    tickAge();
  }

  function showStale() {
    el.stale.hidden = !(stale && inLine());
    roomEl.classList.toggle('is-stale', stale && inLine());
    renderConn();
  }

  function setStale(on) {
    stale = on;
    el.stale.dataset.silentMs = on ? String(Date.now() - lastEventAt) : '';
    roomEl.dataset.stale = on ? 'true' : 'false';
    showStale();
  }

  function tickAge() {
    if (!lastEventAt) return;
    const ms = Date.now() - lastEventAt;
    const secs = Math.max(0, Math.floor(ms / 1000));
    const text = secs < 2 ? t('updated_now') : t('updated_ago', { n: num.format(secs) });
    if (el.updated.textContent !== text) el.updated.textContent = text;
    el.updated.dataset.age = String(secs);
    if (!stale && inLine() && ms > staleAfterMs()) setStale(true);
  }
  setInterval(tickAge, 500);

  // ----- your turn: notification, sound, title -----

  function renderNotify() {
    if (!canNotify) { el.notifyBox.hidden = true; return; }
    const perm = window.Notification.permission;
    const on = notifyWanted && perm === 'granted';
    const blocked = perm === 'denied';
    el.notifyBox.hidden = !inLine() || (blocked && !askedHere);
    el.notifyMe.hidden = on || blocked;
    el.notifyBox.dataset.state = on ? 'on' : blocked ? 'blocked' : 'off';
    el.notifyState.textContent = on ? t('notify_on') : blocked ? t('notify_blocked') : '';
  }

  async function askNotify() {
    unlockAudio();
    askedHere = true;
    let perm = window.Notification.permission;
    if (perm === 'default') {
      try { perm = await window.Notification.requestPermission(); } catch (_) { perm = window.Notification.permission; }
    }
    notifyWanted = perm === 'granted';
    const store = storage();
    if (store) {
      if (notifyWanted) store.setItem(NOTIFY_KEY, '1');
      else store.removeItem(NOTIFY_KEY);
    }
    renderNotify();
    el.notifyState.focus(); // the button is gone: keep the focus near
  }

  /** Audio may start only after a user gesture: make (or resume) the context in one. */
  function unlockAudio() {
    const AC = window.AudioContext || window.webkitAudioContext;
    if (!AC) return;
    try {
      if (!audio) audio = new AC();
      if (audio.state === 'suspended') audio.resume().catch(() => {});
    } catch (_) { audio = null; }
  }

  function beep() {
    if (!audio || audio.state !== 'running') return;
    try {
      const now = audio.currentTime;
      for (const [at, freq] of [[0, 880], [0.22, 1175]]) {
        const osc = audio.createOscillator();
        const gain = audio.createGain();
        osc.type = 'sine';
        osc.frequency.value = freq;
        gain.gain.setValueAtTime(0.0001, now + at);
        gain.gain.exponentialRampToValueAtTime(0.2, now + at + 0.02);
        gain.gain.exponentialRampToValueAtTime(0.0001, now + at + 0.18);
        osc.connect(gain).connect(audio.destination);
        osc.start(now + at);
        osc.stop(now + at + 0.2);
      }
      roomEl.dataset.beeped = 'true';
    } catch (_) { /* no sound: the title and the page still say it */ }
  }

  function stopFlash() {
    if (!flashTimer) return;
    clearInterval(flashTimer);
    flashTimer = null;
    if (phase === 'admitted') document.title = '✔ ' + t('admitted_title') + ' · ' + baseTitle;
  }

  /** The title flashes until the buyer has looked at the page for a few seconds. */
  function flashTitle() {
    stopFlash();
    let on = false;
    let seen = 0;
    let ticks = 0;
    flashTimer = setInterval(() => {
      on = !on;
      document.title = on ? t('title_flash') : '✔ ' + t('admitted_title') + ' · ' + baseTitle;
      seen = !document.hidden && document.hasFocus() ? seen + 1 : 0;
      if (seen >= 6 || ++ticks >= 600 || phase !== 'admitted') stopFlash();
    }, 1000);
  }

  function notifyTurn(deadline) {
    if (!canNotify || !notifyWanted || window.Notification.permission !== 'granted') return;
    try {
      const n = new window.Notification(t('notify_title', { queue }), {
        body: deadline ? t('notify_body', { time: deadline }) : t('admitted_body'),
        tag: 'wr-turn-' + queue,
      });
      n.onclick = () => { window.focus(); n.close(); };
      roomEl.dataset.notified = 'true';
    } catch (_) { /* some browsers allow notifications only from a service worker */ }
  }

  function setNotice(text) {
    el.notice.textContent = text || '';
    el.notice.hidden = !text;
  }

  let powShownAt = 0;
  function renderPow(p) {
    if (phase !== 'joining') return;
    el.pow.hidden = false;
    el.pow.dataset.state = p.state;
    if (p.state === 'retrying') {
      el.powStatus.textContent = t('pow_retrying');
      return;
    }
    el.pow.dataset.difficulty = String(p.difficulty);
    el.pow.dataset.hashes = String(p.hashes);
    // The worker reports ten times a second; the text changes at most four times.
    const now = Date.now();
    if (p.state === 'solving' && p.hashes > 0 && now - powShownAt < 250) return;
    powShownAt = now;
    const pct = p.state === 'solved' ? 100 : Math.min(99, Math.round((1 - Math.exp(-p.hashes / p.expected)) * 100));
    el.powProgress.value = pct;
    el.powProgress.textContent = pct + '%';
    el.powProgress.setAttribute('aria-valuetext', pct + '%');
    el.powStatus.textContent = p.state === 'solved'
      ? t('pow_solved', { s: num1.format(p.ms / 1000) })
      : t('pow_progress', { n: num.format(p.hashes), total: num.format(p.expected) });
  }

  // ----- drop day: the pre-queue before a scheduled start -----

  function setDrawId(id) {
    if (typeof id !== 'string' || !id || id === drawId) return;
    drawId = id;
    const short = id.length > 12 ? id.slice(0, 8) + '…' : id;
    el.drawIdBox.dataset.drawId = id;
    el.drawId.textContent = short;
    el.drawId.title = id;
    el.drawIdFull.textContent = id;
    el.drawnId.textContent = short;
    el.drawnId.title = id;
  }

  function stopStartTimer() {
    clearInterval(startTimer);
    startTimer = null;
  }

  function tickStart() {
    if (typeof startsLocalMs !== 'number') {
      el.startsCountdown.textContent = '–';
      el.startsCountdown.dataset.seconds = '';
      return;
    }
    const left = (startsLocalMs - Date.now()) / 1000;
    const secs = Math.max(0, Math.ceil(left));
    const text = clock(secs);
    if (el.startsCountdown.textContent !== text) {
      el.startsCountdown.textContent = text;
      document.title = '(' + text + ') ' + baseTitle;
    }
    el.startsCountdown.dataset.seconds = String(secs);
    // At zero the server freezes the pre-queue and draws; the place follows in a moment.
    el.preDrawing.hidden = secs > 0;
    el.prequeue.dataset.state = secs > 0 ? 'counting' : 'drawing';
    // Screen readers hear the countdown at a few milestones, not every second.
    for (const m of START_MILESTONES) {
      if (secs <= m && m < lastMilestone && secs > 0) {
        lastMilestone = m;
        if (secs < m - 2) continue; // came in below it: the entry announcement said it
        el.announce.textContent = t('announce_prequeue', { time: etaText(secs, 1) });
      }
    }
  }

  function renderPrequeue(q) {
    if (phase !== 'joining' && phase !== 'prequeue') return; // started, or over
    const first = phase !== 'prequeue';
    phase = 'prequeue';
    hadPlace = true;
    el.pow.hidden = true;
    setDrawId(q.draw_id);
    if (typeof q.prequeue_size === 'number') {
      el.prequeueSize.textContent = t('pre_size_value', { n: num.format(q.prequeue_size) });
      el.prequeueSize.dataset.value = String(q.prequeue_size);
    }
    if (typeof q.starts_at_ms === 'number') startsLocalMs = q.starts_at_ms;
    if (q.starts_at) {
      el.prequeue.dataset.startsAt = q.starts_at;
      el.startsAt.textContent = t('pre_starts_at', { time: startText(q.starts_at) });
    }
    el.prequeue.dataset.offsetMs = String(Math.round(q.offset_ms || 0));
    if (first) {
      show(el.prequeue);
      setNotice('');
      lastMilestone = Infinity;
      const left = typeof startsLocalMs === 'number' ? Math.max(0, (startsLocalMs - Date.now()) / 1000) : null;
      if (left != null) {
        lastMilestone = Math.min(...START_MILESTONES.filter((m) => m >= left));
        el.announce.textContent = t('announce_prequeue', { time: etaText(left, 1) });
      }
    }
    tickStart();
    if (!startTimer) startTimer = setInterval(tickStart, 250);
  }

  function renderSoldOut(s) {
    const was = soldOut;
    soldOut = !!s.sold_out;
    showSoldOut();
    if (soldOut && !was) {
      el.announceUrgent.textContent = t('sold_out_body');
      el.eta.textContent = t('sold_out_title');
      el.eta.dataset.seconds = '';
      renderRate(null, true);
      checkEnds(null);
    } else if (!soldOut && was && phase === 'waiting') {
      el.announce.textContent = t('announce_restocked');
    }
  }

  /** The live admit rate; none while nobody is let in (sold out, paused). */
  function renderRate(rate, stopped) {
    el.rate.dataset.stopped = stopped ? 'true' : 'false';
    if (stopped) {
      el.rate.textContent = t('rate_stopped');
      el.rate.dataset.value = '';
    } else if (typeof rate === 'number') {
      el.rate.textContent = t('rate_value', { n: num1.format(rate) });
      el.rate.dataset.value = String(rate);
    }
  }

  function renderEnded() {
    phase = 'ended';
    stopStartTimer();
    clearInterval(countdownTimer);
    show(el.ended);
    setConn('closed');
    document.title = baseTitle;
    el.announceUrgent.textContent = t('ended_title');
    el.ended.focus();
  }

  function renderPosition(p) {
    if (phase !== 'joining' && phase !== 'prequeue' && phase !== 'waiting') return; // a late event after admission
    const lottery = p.position === null || p.position === undefined;
    if (lottery && typeof p.waiting !== 'number') return;
    const started = phase === 'prequeue';
    const hadFocus = started && el.prequeue.contains(document.activeElement);
    phase = 'waiting';
    stopStartTimer();
    el.pow.hidden = true;
    setDrawId(p.draw_id);
    const rate = typeof p.rate_per_second === 'number' ? p.rate_per_second : lastRate;
    if (typeof p.rate_per_second === 'number') lastRate = p.rate_per_second;
    // onSoldOut follows this call when the flag changed; the ETA already uses the new value.
    const so = typeof p.sold_out === 'boolean' ? p.sold_out : soldOut;

    hadPlace = true;
    show(el.waiting);
    setNotice('');
    el.drawn.hidden = !drawId;
    const nowPaused = !!p.paused && !so;
    if (nowPaused !== paused) {
      paused = nowPaused;
      if (paused) el.announce.textContent = t('paused_note');
    }
    el.pausedNote.hidden = !paused;
    el.waiting.dataset.paused = paused ? 'true' : 'false';
    if (hadFocus) el.waiting.focus();
    renderRate(rate, so || paused);
    if (typeof p.waiting === 'number') {
      el.waitingCount.textContent = t('waiting_value', { n: num.format(p.waiting) });
      el.waitingCount.dataset.value = String(p.waiting);
    }
    el.eta.dataset.seconds = p.eta_seconds == null ? '' : String(p.eta_seconds);
    const eta = so ? t('sold_out_title') : p.paused ? t('eta_paused')
      : lottery && p.eta_seconds == null ? t('eta_lottery') : waitText(p.eta_seconds, rate);
    el.eta.textContent = eta;
    checkEnds(so || p.paused ? null : p.eta_seconds);

    const mode = lottery ? 'lottery' : 'line';
    el.waiting.dataset.mode = mode;
    el.positionLine.hidden = lottery;
    el.lottery.hidden = !lottery;
    el.aheadStat.hidden = lottery;
    el.progressWrap.hidden = lottery;
    if (lottery) {
      el.position.textContent = '–';
      el.position.dataset.position = '';
      el.lotteryLine.textContent = tn('lottery', p.waiting, { n: num.format(p.waiting) });
      el.lotteryLine.dataset.value = String(p.waiting);
      document.title = baseTitle;
      if (started || lastMode !== mode) {
        el.announce.textContent = tn('announce_lottery', p.waiting, { n: num.format(p.waiting) });
      }
      lastMode = mode;
      return;
    }
    lastMode = mode;
    const pos = Math.max(1, p.position);
    if (lostPending) {
      // Never a silent move to the back: the old place is gone, say so with the new one.
      lostPending = false;
      const store0 = storage();
      if (store0) store0.setItem(START_KEY, String(pos));
      el.lostPlace.textContent = t('lost_place', { n: positionText(pos) });
      el.lostPlace.dataset.position = String(pos);
      el.lostPlace.hidden = false;
    }
    if (started) {
      // The draw gave this place: say so at once, not at the next throttled announcement.
      el.announceUrgent.textContent = t('announce_started', { n: num.format(pos), ord: positionText(pos) });
      lastAnnounce = { at: Date.now(), position: pos };
    }
    el.position.textContent = positionText(pos);
    el.position.dataset.position = String(pos);
    el.ahead.textContent = t('ahead_value', { n: num.format(pos - 1) });
    el.ahead.dataset.value = String(pos - 1);

    // Progress from the place we got at join to the door.
    const store = storage();
    let start = Number(store && store.getItem(START_KEY)) || 0;
    if (pos > start) {
      start = pos;
      if (store) store.setItem(START_KEY, String(start));
    }
    const pct = start > 0 ? Math.round(((start - pos) / start) * 100) : 0;
    el.progress.value = Math.max(2, pct);
    el.progress.textContent = pct + '%';
    el.progress.setAttribute('aria-valuetext', pct + '%');

    document.title = '(' + positionText(pos) + ') ' + baseTitle;

    // Screen readers: not every second. Every 20 s, or 5 s near the front.
    const now = Date.now();
    const gap = pos <= 3 ? 5000 : 20000;
    if (pos !== lastAnnounce.position && (lastAnnounce.position === null || now - lastAnnounce.at >= gap)) {
      lastAnnounce = { at: now, position: pos };
      el.announce.textContent = t('announce_position', { n: num.format(pos), ord: positionText(pos), eta });
    }
  }

  function renderAdmitted(a) {
    phase = 'admitted';
    stopStartTimer();
    show(el.admitted);
    setNotice('');
    el.progress.value = 100;
    const store = storage();
    if (store) store.removeItem(START_KEY);
    if (a.redirect) el.goOrder.setAttribute('href', a.redirect);
    document.title = '✔ ' + t('admitted_title') + ' · ' + baseTitle;
    const deadline = typeof a.expires_at_ms === 'number' ? timeOfDay(a.expires_at_ms) : '';
    el.turnDeadline.textContent = deadline ? t('turn_deadline', { time: deadline }) : '';
    el.turnDeadline.dataset.deadline = typeof a.expires_at_ms === 'number' ? new Date(a.expires_at_ms).toISOString() : '';
    notifyTurn(deadline);
    beep();
    flashTitle();
    // The redirect flow: back to the shop (an allowed origin, checked by the server) with
    // the signed token in the fragment, which browsers never send to a server.
    if (returnTo && a.token) {
      el.goOrder.setAttribute('href', returnTo + '#wr_token=' + encodeURIComponent(a.token));
      setNotice(t('returning'));
      window.location.replace(returnTo + '#wr_token=' + encodeURIComponent(a.token));
    } else if (autoRedirect && a.redirect) {
      // The queue's auto_redirect: to the order page (same origin, no token in the URL).
      setNotice(t('auto_redirecting'));
      clearTimeout(redirectTimer);
      redirectTimer = setTimeout(() => { if (phase === 'admitted') window.location.assign(a.redirect); }, AUTO_REDIRECT_MS);
    }
    el.announceUrgent.textContent = t('announce_admitted');
    el.goOrder.focus();

    clearInterval(countdownTimer);
    const tick = () => {
      if (typeof a.expires_at_ms !== 'number') {
        el.countdown.textContent = '–';
        return;
      }
      const left = (a.expires_at_ms - Date.now()) / 1000;
      el.countdown.textContent = clock(left);
      el.countdown.dataset.seconds = String(Math.max(0, Math.ceil(left)));
      el.countdown.classList.toggle('urgent', left < 60);
    };
    tick();
    countdownTimer = setInterval(tick, 250);
  }

  function renderExpired() {
    phase = 'expired';
    stopStartTimer();
    clearInterval(countdownTimer);
    show(el.expired);
    setConn('closed');
    document.title = baseTitle;
    el.announceUrgent.textContent = t('announce_expired');
    el.expired.focus();
  }

  function renderLeft() {
    phase = 'left';
    stopStartTimer();
    clearInterval(countdownTimer);
    show(el.left);
    document.title = baseTitle;
    el.left.focus();
  }

  function renderFatal(err) {
    phase = 'error';
    stopStartTimer();
    show(el.joinError);
    setConn('closed');
    el.joinError.dataset.reason = err.code || '';
    if (err.code === 'queue_not_found') {
      el.joinErrorTitle.textContent = t('err_not_found_title');
      el.joinErrorBody.textContent = t('err_not_found_body');
    } else if (err.code === 'queue_closed') {
      // Closed to new joiners, or a queue whose method is reject: the sale is not open.
      el.joinErrorTitle.textContent = t('err_not_open_title');
      el.joinErrorBody.textContent = t('err_not_open_body');
    } else if (err.code === 'sold_out') {
      el.joinErrorTitle.textContent = t('sold_out_title');
      el.joinErrorBody.textContent = t('err_sold_out_body');
    } else if (err.code === 'queue_ended') {
      el.joinErrorTitle.textContent = t('ended_title');
      el.joinErrorBody.textContent = t('ended_body');
    } else if (err.code === 'pow_invalid' || err.code === 'pow_required' || err.code === 'pow_unsupported') {
      el.joinErrorTitle.textContent = t('err_pow_title');
      el.joinErrorBody.textContent = t('err_pow_body');
    } else if (err.code === 'invite_invalid') {
      el.joinErrorTitle.textContent = t('err_invite_title');
      el.joinErrorBody.textContent = t('err_invite_body');
    } else if (err.code === 'too_many_places') {
      el.joinErrorTitle.textContent = t('err_too_many_places_title');
      el.joinErrorBody.textContent = t('err_too_many_places_body');
    } else {
      el.joinErrorTitle.textContent = t('err_generic_title');
      el.joinErrorBody.textContent = (err.message ? err.message + ' — ' : '') + t('err_generic_body');
    }
    el.joinError.focus();
  }

  // ----- wiring -----

  /** An invite's lane: the page says which line the buyer is in (positions are that line's). */
  function renderLane(lane) {
    const el2 = document.getElementById('lane');
    if (!el2) return;
    const special = lane === 'priority' || lane === 'bypass';
    el2.hidden = !special;
    el2.dataset.lane = special ? lane : 'normal';
    el2.textContent = special ? t('lane_' + lane) : '';
  }

  function start() {
    const gen = ++generation;
    const live = () => gen === generation;
    lastAnnounce = { at: 0, position: null };
    phase = 'joining';
    soldOut = false;
    drawId = '';
    startsLocalMs = null;
    lastMode = '';
    hadPlace = false;
    lostPending = false;
    paused = false;
    lastEventAt = 0;
    stale = false;
    pollEvery = 0;
    if (el.endsWarning) el.endsWarning.dataset.warned = 'false';
    stopFlash();
    el.lostPlace.hidden = true;
    el.pausedNote.hidden = true;
    stopStartTimer();
    el.drawn.hidden = true;
    show(el.joining);
    el.pow.hidden = true;
    el.pow.dataset.state = '';
    room = W.join({
      queue,
      invite,
      // The proof-of-work worker of this page's release (content-hashed, like the scripts).
      powWorkerUrl: roomEl.dataset.powWorker || '',
      onPow(p) { if (live()) renderPow(p); },
      onJoin(j) {
        if (!live()) return;
        // 201 after this room had a place: the server lost it (the page says so).
        if (j.resumed === false && hadPlace) lostPending = true;
        heard();
        renderLane(j.lane);
        setDrawId(j.draw_id);
      },
      onState(state) { if (live() && phase !== 'ended') setConn(state); },
      onPolling(p) { if (live()) renderPolling(p); },
      onPing(p) {
        if (!live()) return;
        if (typeof p.interval_ms === 'number' && p.interval_ms > 0) {
          pingEveryMs = p.interval_ms;
          roomEl.dataset.staleAfterMs = String(staleAfterMs()); // when silence counts as stale
        }
        heard();
      },
      onPrequeue(q) { if (live()) { heard(); renderPrequeue(q); } },
      onPosition(p) { if (live()) { heard(); renderPosition(p); } },
      onSoldOut(s) { if (live()) { heard(); renderSoldOut(s); } },
      // A buyer holding a live token keeps it after the end (the end drops places, not
      // admissions): the admitted view stays.
      onClosed() { if (live() && phase !== 'admitted') renderEnded(); },
      onAdmitted(a) { if (live()) { heard(); renderAdmitted(a); } },
      onExpired() { if (live()) renderExpired(); },
      onLeft() { if (live()) renderLeft(); },
      onError(err) {
        if (!live()) return;
        if (err.fatal) { renderFatal(err); return; }
        const vars = { n: num.format(err.retryIn || 1) };
        if (err.status === 429) setNotice(t('notice_busy', vars));
        else if (err.status === 503) setNotice(t('notice_unavailable', vars));
        else setNotice(t('notice_network', vars));
      },
    });
  }

  function restart() {
    if (room) room.close();
    const store = storage();
    if (store) store.removeItem(START_KEY);
    start();
  }

  // E-mail reminders: the form is on the page only when the server sends mail. The address
  // goes to POST /api/queues/{queue}/notify with this page's ticket (its cookie); a refusal
  // is said next to the field and the address stays in it.
  const emailForm = $('email-form');
  if (emailForm) {
    const input = $('email-input');
    const state = $('email-state');
    const say = (text, st) => {
      state.textContent = text;
      emailForm.dataset.state = st;
      if (st === 'invalid') input.setAttribute('aria-invalid', 'true');
      else input.removeAttribute('aria-invalid');
    };
    emailForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const email = input.value.trim();
      if (!email || email.length > 254 || email.indexOf('@') < 1) {
        say(t('notify_email_invalid'), 'invalid');
        input.focus();
        return;
      }
      const button = $('email-submit');
      button.disabled = true;
      try {
        const res = await fetch('/api/queues/' + encodeURIComponent(queue) + '/notify', {
          method: 'POST', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email }),
        });
        if (res.status === 204) say(t('notify_email_saved', { email }), 'saved');
        else if (res.status === 422) { say(t('notify_email_invalid'), 'invalid'); input.focus(); }
        else if (res.status === 429) say(t('notify_email_limited'), 'limited');
        else say(t('notify_email_failed'), 'failed');
      } catch (_) {
        say(t('notify_email_failed'), 'failed');
      } finally {
        button.disabled = false;
      }
    });
  }

  if (canNotify) {
    const store = storage();
    notifyWanted = !!store && store.getItem(NOTIFY_KEY) === '1';
    el.notifyMe.addEventListener('click', askNotify);
  }
  // Any gesture on the page lets the turn's beep play later.
  document.addEventListener('pointerdown', unlockAudio, { once: true, capture: true });
  document.addEventListener('keydown', unlockAudio, { once: true, capture: true });
  window.addEventListener('focus', () => { if (phase === 'admitted' && !document.hidden) setTimeout(stopFlash, 3000); });

  el.rejoin.addEventListener('click', restart);
  el.joinAgain.addEventListener('click', restart);
  /**
   * Asks before leaving (the place cannot be given back): the dashboard's confirmation
   * pattern — answered by the buttons' clicks and Escape's cancel of this showing, the safe
   * answer (stay) focused first.
   */
  function confirmLeave() {
    const d = el.leaveDialog;
    if (!d || typeof d.showModal !== 'function') return Promise.resolve(window.confirm(t('leave_confirm_body')));
    d.returnValue = '';
    return new Promise((resolve) => {
      const done = (v) => {
        el.leaveOk.removeEventListener('click', onOk);
        el.leaveCancel.removeEventListener('click', onCancel);
        d.removeEventListener('cancel', onCancel);
        resolve(v);
      };
      const onOk = () => done(true);
      const onCancel = () => done(false);
      el.leaveOk.addEventListener('click', onOk);
      el.leaveCancel.addEventListener('click', onCancel);
      d.addEventListener('cancel', onCancel);
      d.showModal();
      el.leaveCancel.focus();
    });
  }

  async function askLeave(button) {
    if (button.disabled) return;
    button.disabled = true;
    const ok = await confirmLeave();
    button.disabled = false;
    if (!ok) { button.focus(); return; }
    if (!inLine() && phase !== 'joining') return; // the state moved on while the dialog was open
    leave(button);
  }

  function leave(button) {
    button.disabled = true;
    const r = room;
    generation++; // ignore the closing room's callbacks; we render "left" ourselves
    r.leave().finally(() => {
      button.disabled = false;
      const store = storage();
      if (store) store.removeItem(START_KEY);
      setConn('closed');
      renderLeft();
    });
  }
  el.leave.addEventListener('click', () => askLeave(el.leave));
  el.prequeueLeave.addEventListener('click', () => askLeave(el.prequeueLeave));

  // ----- an operator's own page: the slots it placed (docs/TEMPLATES.md) -----

  /**
   * {{slot "name"}} in a queue's own page is a [data-wr-slot] element outside the room; it
   * shows what the room's own element shows (already in the page's language), kept in step
   * by watching the room. "state" is the visible card's title, else the connection's state.
   */
  const slotSources = { position: el.position, ahead: el.ahead, eta: el.eta, rate: el.rate, waiting: el.waitingCount, starts_in: el.startsCountdown };
  function slotText(name) {
    if (name === 'state') {
      const visible = sections.find((sec) => !sec.hidden);
      const h = visible && visible.querySelector('h2');
      return ((h && h.textContent) || el.conn.textContent || '').trim();
    }
    return slotSources[name] ? slotSources[name].textContent : null;
  }
  function fillSlots() {
    for (const node of document.querySelectorAll('[data-wr-slot]')) {
      const text = slotText(node.dataset.wrSlot);
      if (text != null && node.textContent !== text) node.textContent = text;
    }
  }
  if (document.querySelector('[data-wr-slot]')) {
    new MutationObserver(fillSlots).observe(roomEl, { subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['hidden'] });
    fillSlots();
  }

  start();
})();
