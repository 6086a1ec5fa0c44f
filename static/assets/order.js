/*
 * order.js — the order page /q/{queue}/order. Shows the product with its
 * live stock (a light 2 s poll: this page is behind the waiting room), and
 * buys with POST /api/orders using the admission token kept in
 * sessionStorage by the waiting page (never in the URL). One
 * Idempotency-Key per purchase attempt, reused when that attempt is retried,
 * so a retry after a timeout or 503 can never order twice.
 */
(function () {
  'use strict';

  const W = window.WaitRoom;
  const shop = document.getElementById('shop');
  if (!W || !shop) return;

  const { t, readError, retryDelayMs } = W.util;
  const queue = shop.dataset.queue;
  let productId = shop.dataset.productId || '';
  const lang = document.documentElement.lang || 'en';
  const num = new Intl.NumberFormat(lang);
  const money = new Intl.NumberFormat(lang, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const POLL_MS = 2000;
  const MAX_QTY = 99;

  const $ = (id) => document.getElementById(id);
  const el = {
    tokenState: $('token-state'),
    tokenText: $('token-text'),
    tokenLeft: $('token-left'),
    noToken: $('no-token'),
    product: $('product'),
    name: $('product-name'),
    price: $('price'),
    stock: $('stock'),
    form: $('buy-form'),
    qty: $('qty'),
    buy: $('buy'),
    result: $('order-result'),
    resultText: $('order-result-text'),
    orderIdLine: $('order-id-line'),
    orderId: $('order-id'),
    backLine: $('back-to-line-line'),
  };

  let token = null;          // {token, expires_at, expires_at_ms}
  let tokenTimer = null;
  let product = null;
  let attempt = null;        // {key, productId, qty}: one purchase attempt
  let busy = false;
  let done = false;          // an order went through, or admission is gone
  let blockedUntil = 0;      // after a 429
  let blockTimer = null;
  let pollTimer = null;

  // ----- helpers -----

  function uuid() {
    if (window.crypto && typeof window.crypto.randomUUID === 'function') return window.crypto.randomUUID();
    // randomUUID needs a secure context; getRandomValues does not.
    const b = window.crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }

  function clock(seconds) {
    const s = Math.max(0, Math.ceil(seconds));
    return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  }

  function canBuy() {
    return !busy && !done && token && product && product.stock > 0 && Date.now() >= blockedUntil;
  }

  function refreshButton() {
    el.buy.disabled = !canBuy();
  }

  function showResult(outcome, text, opts) {
    el.result.hidden = false;
    el.result.dataset.outcome = outcome;
    el.resultText.textContent = text;
    el.orderIdLine.hidden = !(opts && opts.orderId);
    if (opts && opts.orderId) el.orderId.textContent = opts.orderId;
    el.backLine.hidden = !(opts && opts.backToLine);
  }

  // ----- admission token -----

  function setTokenState(state) {
    el.tokenState.dataset.state = state;
    if (state === 'valid') el.tokenText.textContent = t('order_token_valid');
    else if (state === 'expired') el.tokenText.textContent = t('order_token_expired');
    else if (state === 'missing' || state === 'used') el.tokenText.textContent = '';
    if (state !== 'valid') el.tokenLeft.textContent = '';
    el.tokenState.hidden = state === 'missing' || state === 'used';
  }

  function admissionGone() {
    token = null;
    done = true;
    clearInterval(tokenTimer);
    W.clearToken(queue);
    setTokenState('expired');
    refreshButton();
  }

  function watchToken() {
    clearInterval(tokenTimer);
    const tick = () => {
      if (!token) return;
      if (typeof token.expires_at_ms !== 'number') { el.tokenLeft.textContent = ''; return; }
      const left = (token.expires_at_ms - Date.now()) / 1000;
      el.tokenLeft.textContent = clock(left);
      el.tokenLeft.dataset.seconds = String(Math.max(0, Math.ceil(left)));
      el.tokenLeft.classList.toggle('urgent', left < 60);
      if (left <= 0 && !busy) {
        admissionGone();
        showResult('expired', t('order_expired'), { backToLine: true });
      }
    };
    tick();
    tokenTimer = setInterval(tick, 250);
  }

  async function loadToken() {
    token = W.getToken(queue);
    if (!token) {
      // Storage lost, or admitted in another tab: ask the server once.
      try {
        await W.status(queue);
        token = W.getToken(queue);
      } catch (_) { token = null; }
    }
    if (token) {
      setTokenState('valid');
      watchToken();
    } else {
      setTokenState('missing');
      el.noToken.hidden = false;
      done = true;
    }
    refreshButton();
  }

  // ----- product and stock -----

  function renderProduct(p) {
    product = p;
    el.product.removeAttribute('aria-busy');
    el.name.textContent = p.name || p.id;
    el.price.textContent = money.format((Number(p.price) || 0) / 100);
    el.stock.dataset.stock = String(p.stock);
    el.stock.textContent = p.stock > 0 ? t('stock_left', { n: num.format(p.stock) }) : t('stock_sold_out');
    el.stock.classList.toggle('sold-out', !(p.stock > 0));
    refreshButton();
  }

  async function pickProduct() {
    const res = await fetch('/api/products', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    if (!res.ok) throw await readError(res);
    const body = await res.json();
    const list = Array.isArray(body) ? body : (body && body.products) || [];
    const first = list.find((p) => p.stock > 0) || list[0];
    if (!first) throw { status: 404, code: 'product_not_found', message: '' };
    return first.id;
  }

  async function loadProduct() {
    if (!productId) productId = await pickProduct();
    const res = await fetch('/api/products/' + encodeURIComponent(productId), {
      credentials: 'same-origin',
      headers: { Accept: 'application/json' },
      cache: 'no-store',
    });
    if (!res.ok) throw await readError(res);
    renderProduct(await res.json());
  }

  function schedulePoll(ms) {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, ms);
  }

  async function poll() {
    if (document.hidden) return; // resumed by visibilitychange
    let delay = POLL_MS;
    try {
      await loadProduct();
    } catch (err) {
      if (err && err.status === 404) {
        el.name.textContent = t('order_no_product');
        el.product.removeAttribute('aria-busy');
        product = null;
        refreshButton();
        return; // nothing to poll
      }
      if (err && (err.status === 429 || err.status === 503)) delay = Math.max(POLL_MS, retryDelayMs(err.retryAfter));
      else delay = POLL_MS * 2;
    }
    schedulePoll(delay);
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) schedulePoll(0);
  });

  // ----- buying -----

  function blockFor(seconds) {
    blockedUntil = Date.now() + seconds * 1000;
    clearInterval(blockTimer);
    const tick = () => {
      const left = Math.ceil((blockedUntil - Date.now()) / 1000);
      if (left <= 0) {
        clearInterval(blockTimer);
        refreshButton();
        return;
      }
      el.resultText.textContent = t('order_slow_down', { n: left });
    };
    tick();
    blockTimer = setInterval(tick, 500);
    refreshButton();
  }

  async function buy(e) {
    e.preventDefault();
    if (!canBuy()) return;
    const qty = Number(el.qty.value);
    if (!Number.isInteger(qty) || qty < 1 || qty > MAX_QTY) {
      showResult('invalid', t('order_qty_invalid', { max: MAX_QTY }));
      el.qty.setAttribute('aria-invalid', 'true');
      el.qty.focus();
      return;
    }
    el.qty.removeAttribute('aria-invalid');
    token = W.getToken(queue);
    if (!token) {
      admissionGone();
      showResult('expired', t('order_expired'), { backToLine: true });
      return;
    }
    // Same product and quantity as the unfinished attempt: it is a retry of it.
    if (!attempt || attempt.qty !== qty || attempt.productId !== productId) {
      attempt = { key: uuid(), qty, productId };
    }

    busy = true;
    refreshButton();
    el.buy.setAttribute('aria-busy', 'true');
    showResult('pending', t('order_buying'));
    let res;
    try {
      res = await fetch('/api/orders', {
        method: 'POST',
        credentials: 'same-origin',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json',
          'X-Admission-Token': token.token,
          'Idempotency-Key': attempt.key,
        },
        body: JSON.stringify({ product_id: attempt.productId, quantity: attempt.qty }),
      });
    } catch (_) {
      finish();
      showResult('network', t('order_network')); // keep the key: a retry is the same attempt
      return;
    }

    if (res.status === 201 || res.status === 200) {
      const body = (await res.json().catch(() => null)) || {};
      const order = body.order || {};
      attempt = null;
      done = true;
      token = null;
      clearInterval(tokenTimer);
      W.clearToken(queue);
      setTokenState('used');
      finish();
      showResult('success', t('order_success'), { orderId: order.id || '?' });
      schedulePoll(0);
      return;
    }

    const err = await readError(res);
    finish();
    if (res.status === 409 && err.code === 'sold_out') {
      attempt = null;
      showResult('sold_out', t('order_sold_out'));
      schedulePoll(0);
    } else if (res.status === 429) {
      showResult('rate_limited', t('order_slow_down', { n: err.retryAfter == null ? 1 : err.retryAfter }));
      blockFor(Math.max(1, err.retryAfter == null ? 1 : err.retryAfter));
    } else if (res.status === 403 && (err.code === 'product_not_on_sale' || err.code === 'token_wrong_queue')) {
      // The token is still good for what its own queue sells: keep it.
      attempt = null;
      showResult('error', t('order_error', { msg: err.message }));
    } else if (res.status === 401 || res.status === 403) {
      attempt = null;
      admissionGone();
      showResult('expired', t('order_expired'), { backToLine: true });
    } else if (res.status >= 500) {
      showResult('busy', t('order_busy')); // 503 or other: same key on retry
    } else {
      attempt = null;
      showResult('error', t('order_error', { msg: err.message }));
    }
  }

  function finish() {
    busy = false;
    el.buy.removeAttribute('aria-busy');
    refreshButton();
  }

  el.form.addEventListener('submit', buy);
  el.qty.addEventListener('input', () => el.qty.removeAttribute('aria-invalid'));

  loadToken();
  poll();
})();
