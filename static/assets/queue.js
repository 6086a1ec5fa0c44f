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
 * When the queue asks for a proof of work, WaitRoom solves it in a Web Worker
 * and this page shows the progress in #pow: a bar and "n of about N tries".
 * The bar shows 1 − e^(−tried/N), the chance that a solution is found by
 * now: it moves smoothly and never sits at 100 % while the worker is still
 * looking (the number of tries needed is random, N = 2^difficulty on average).
 */
(function () {
  'use strict';

  const W = window.WaitRoom;
  const roomEl = document.getElementById('room');
  if (!W || !roomEl) return; // unknown or closed queue: the page says so, nothing to join

  const { t, ordinal } = W.util;
  const queue = roomEl.dataset.queue;
  const lang = document.documentElement.lang || 'en';
  const num = new Intl.NumberFormat(lang);
  const num1 = new Intl.NumberFormat(lang, { maximumFractionDigits: 1 });
  const START_KEY = 'wr_start:' + queue;
  const invite = (new URLSearchParams(window.location.search).get('invite') || '').slice(0, 128);
  const baseTitle = document.title;
  // The redirect flow's return_to, checked by the server against the queue's
  // allowed_origins (a refused one never reaches this script).
  const returnTo = roomEl.dataset.returnTo || '';

  const $ = (id) => document.getElementById(id);
  const el = {
    conn: $('conn-state'),
    joining: $('joining'),
    waiting: $('waiting'),
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
  };
  const sections = [el.joining, el.waiting, el.admitted, el.expired, el.left, el.joinError];

  let room = null;
  let generation = 0;
  let countdownTimer = null;
  let lastAnnounce = { at: 0, position: null };
  let lastRate = null;
  let phase = 'joining'; // joining | waiting | admitted | expired | left | error

  function show(section) {
    for (const s of sections) s.hidden = s !== section;
  }

  function storage() {
    try { return window.sessionStorage; } catch (_) { return null; }
  }

  // ----- formatting -----

  function positionText(n) {
    const ord = lang === 'en' ? num.format(n) + ordinal(n).replace(/^\d+/, '') : num.format(n);
    return t('pos_number', { n: num.format(n), ord });
  }

  function etaText(seconds, rate) {
    if (rate === 0 || seconds == null || !Number.isFinite(seconds) || seconds < 0) return t('eta_unknown');
    const s = Math.round(seconds);
    if (s <= 1) return t('eta_soon');
    if (s < 60) return t('eta_seconds', { n: s });
    const m = Math.round(s / 60);
    if (m < 60) return t('eta_minutes', { n: m });
    return t('eta_hours', { h: Math.floor(s / 3600), m: Math.round((s % 3600) / 60) });
  }

  function clock(seconds) {
    const s = Math.max(0, Math.ceil(seconds));
    const m = Math.floor(s / 60);
    return m + ':' + String(s % 60).padStart(2, '0');
  }

  // ----- rendering -----

  function setConn(state) {
    el.conn.dataset.state = state;
    el.conn.textContent = t('conn_' + state);
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

  function renderPosition(p) {
    if (typeof p.position !== 'number') return;
    if (phase !== 'joining' && phase !== 'waiting') return; // a late event after admission
    phase = 'waiting';
    el.pow.hidden = true;
    const pos = Math.max(1, p.position);
    const rate = typeof p.rate_per_second === 'number' ? p.rate_per_second : lastRate;
    if (typeof p.rate_per_second === 'number') lastRate = p.rate_per_second;

    show(el.waiting);
    setNotice('');
    el.position.textContent = positionText(pos);
    el.position.dataset.position = String(pos);
    el.ahead.textContent = t('ahead_value', { n: num.format(pos - 1) });
    el.ahead.dataset.value = String(pos - 1);
    const eta = etaText(p.eta_seconds, rate);
    el.eta.textContent = eta;
    el.eta.dataset.seconds = p.eta_seconds == null ? '' : String(p.eta_seconds);
    if (typeof p.waiting === 'number') {
      el.waitingCount.textContent = t('waiting_value', { n: num.format(p.waiting) });
      el.waitingCount.dataset.value = String(p.waiting);
    }
    if (typeof rate === 'number') {
      el.rate.textContent = t('rate_value', { n: num1.format(rate) });
      el.rate.dataset.value = String(rate);
    }

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
    show(el.admitted);
    setNotice('');
    el.progress.value = 100;
    const store = storage();
    if (store) store.removeItem(START_KEY);
    if (a.redirect) el.goOrder.setAttribute('href', a.redirect);
    document.title = '✔ ' + t('admitted_title') + ' · ' + baseTitle;
    // The redirect flow: back to the shop (an allowed origin, checked by the server) with
    // the signed token in the fragment, which browsers never send to a server.
    if (returnTo && a.token) {
      el.goOrder.setAttribute('href', returnTo + '#wr_token=' + encodeURIComponent(a.token));
      setNotice(t('returning'));
      window.location.replace(returnTo + '#wr_token=' + encodeURIComponent(a.token));
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
    clearInterval(countdownTimer);
    show(el.expired);
    setConn('closed');
    document.title = baseTitle;
    el.announceUrgent.textContent = t('announce_expired');
    el.expired.focus();
  }

  function renderLeft() {
    phase = 'left';
    clearInterval(countdownTimer);
    show(el.left);
    document.title = baseTitle;
    el.left.focus();
  }

  function renderFatal(err) {
    phase = 'error';
    show(el.joinError);
    el.joinError.dataset.reason = err.code || '';
    if (err.code === 'queue_not_found') {
      el.joinErrorTitle.textContent = t('err_not_found_title');
      el.joinErrorBody.textContent = t('err_not_found_body');
    } else if (err.code === 'queue_closed') {
      el.joinErrorTitle.textContent = t('err_closed_title');
      el.joinErrorBody.textContent = t('err_closed_body');
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
    show(el.joining);
    el.pow.hidden = true;
    el.pow.dataset.state = '';
    room = W.join({
      queue,
      invite,
      onPow(p) { if (live()) renderPow(p); },
      onJoin(j) { if (live()) renderLane(j.lane); },
      onState(state) { if (live()) setConn(state); },
      onPosition(p) { if (live()) renderPosition(p); },
      onAdmitted(a) { if (live()) renderAdmitted(a); },
      onExpired() { if (live()) renderExpired(); },
      onLeft() { if (live()) renderLeft(); },
      onError(err) {
        if (!live()) return;
        if (err.fatal) { renderFatal(err); return; }
        const vars = { n: err.retryIn || 1 };
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

  el.rejoin.addEventListener('click', restart);
  el.joinAgain.addEventListener('click', restart);
  el.leave.addEventListener('click', () => {
    el.leave.disabled = true;
    const r = room;
    generation++; // ignore the closing room's callbacks; we render "left" ourselves
    r.leave().finally(() => {
      el.leave.disabled = false;
      const store = storage();
      if (store) store.removeItem(START_KEY);
      setConn('closed');
      renderLeft();
    });
  });

  start();
})();
