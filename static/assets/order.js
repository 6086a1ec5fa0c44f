/*
 * order.js — the order page /q/{queue}/order. The page belongs to its queue:
 * the server lists the products that queue sells into #wr-products (and
 * renders them: a chooser, a radio group, when there are several; the one
 * chosen — ?product= or the first in stock — in #product), and says so
 * instead (#shop[data-state] not "ready") when there is nothing to buy here.
 * This script keeps their stock live (a light 2 s poll of
 * GET /api/products?queue=: this page is behind the waiting room), switches
 * the product when the buyer picks another, and buys with POST /api/orders
 * using the admission token kept in sessionStorage by the waiting page (never
 * in the URL). One Idempotency-Key per purchase attempt, reused when that
 * attempt is retried, so a retry after a timeout or 503 can never order twice.
 *
 * Prices are integers in the minor units of the product's currency (ISO
 * 4217); the server sends the currency's decimals (currency_digits) so the
 * page shows price / 10^digits with Intl.NumberFormat in the page's language
 * (189000 KRW → ₩189,000, 4500 EUR → €45.00). After an order the form is
 * hidden and a receipt takes its place, with the focus on it.
 */
(function () {
  'use strict';

  const W = window.WaitRoom;
  const shop = document.getElementById('shop');
  if (!W || !shop) return;

  const { t, tn, readError, retryDelayMs } = W.util;
  const queue = shop.dataset.queue;
  const pageState = shop.dataset.state || 'ready';
  let productId = shop.dataset.productId || '';
  const lang = document.documentElement.lang || 'en';
  const num = new Intl.NumberFormat(lang);
  const timeFmt = new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'medium' });
  const IN_USE_RETRIES = 5; // 409 token_in_use: another request holds the token for a moment
  const POLL_MS = 2000;
  const MAX_QTY = 1000; // the order API's limit; a product's max_per_order is at most this
  const listUrl = '/api/products?queue=' + encodeURIComponent(queue);

  const $ = (id) => document.getElementById(id);

  /** The products this page offers, by id, as the server listed them (#wr-products). */
  const offered = new Map();
  try {
    const list = JSON.parse(($('wr-products') || {}).textContent || 'null');
    if (Array.isArray(list)) list.forEach((p) => offered.set(p.id, p));
  } catch (_) { /* an empty page: nothing offered */ }

  if (pageState === 'unavailable') {
    // The products could not be read: ask again until they can, then show the page anew.
    const retry = async () => {
      try {
        const res = await fetch(listUrl, { credentials: 'same-origin', headers: { Accept: 'application/json' }, cache: 'no-store' });
        if (res.ok) { window.location.reload(); return; }
      } catch (_) { /* still down */ }
      setTimeout(retry, 3000);
    };
    setTimeout(retry, 3000);
    return;
  }
  if (pageState !== 'ready' || !$('buy-form')) {
    // Nothing is bought here (another queue's product, none on sale, no such queue): the
    // page says so; only the prices in the list of what this queue sells are formatted.
    document.querySelectorAll('#sold-here a[data-product]').forEach((a) => {
      const p = offered.get(a.dataset.product);
      const price = a.nextElementSibling;
      if (p && price) price.textContent = formatMoney(p.price, p.currency, p.currency_digits);
    });
    return;
  }

  const el = {
    tokenState: $('token-state'),
    tokenText: $('token-text'),
    tokenLeft: $('token-left'),
    noToken: $('no-token'),
    product: $('product'),
    name: $('product-name'),
    price: $('price'),
    stock: $('stock'),
    caps: $('caps'),
    chooser: $('chooser'),
    form: $('buy-form'),
    qty: $('qty'),
    buy: $('buy'),
    result: $('order-result'),
    resultText: $('order-result-text'),
    receipt: $('receipt'),
    receiptTitle: $('receipt-title'),
    receiptProduct: $('receipt-product'),
    receiptQty: $('receipt-qty'),
    receiptUnit: $('receipt-unit'),
    receiptTotal: $('receipt-total'),
    receiptRef: $('receipt-ref'),
    receiptTime: $('receipt-time'),
    copyRef: $('copy-ref'),
    copyStatus: $('copy-status'),
    orderIdLine: $('order-id-line'),
    orderId: $('order-id'),
    backLine: $('back-to-line-line'),
  };

  let token = null;          // {token, expires_at, expires_at_ms}
  let tokenTimer = null;
  let product = null;
  let attempt = null;        // {key, productId, qty, inUse, shown}: one purchase attempt
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

  /**
   * formatMoney shows minor units as an amount of the currency in the page's
   * language. A currency the browser does not know (Intl throws a RangeError)
   * falls back to the number with the code after it, never to a wrong symbol.
   */
  function formatMoney(minor, currency, digits) {
    const d = Number.isInteger(digits) && digits >= 0 && digits <= 3 ? digits : 2;
    const amount = (Number(minor) || 0) / Math.pow(10, d);
    try {
      return new Intl.NumberFormat(lang, {
        style: 'currency', currency: currency || 'USD', minimumFractionDigits: d, maximumFractionDigits: d,
      }).format(amount);
    } catch (_) {
      return new Intl.NumberFormat(lang, { minimumFractionDigits: d, maximumFractionDigits: d }).format(amount) +
        (currency ? ' ' + currency : '');
    }
  }

  /** The short order reference: the first 8 characters of the id, upper-case. */
  function shortRef(id) {
    return String(id || '').replace(/-/g, '').slice(0, 8).toUpperCase();
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

  // ----- products and stock -----

  function stockText(p) {
    if (p.gone) return t('order_moved');
    return p.stock > 0 ? tn('stock_left', p.stock, { n: num.format(p.stock) }) : t('stock_sold_out');
  }

  /** renderChoices writes each choice's price and stock in the page's language. */
  function renderChoices() {
    if (el.chooser.hidden) return;
    offered.forEach((p, id) => {
      const price = el.chooser.querySelector('[data-price-of="' + CSS.escape(id) + '"]');
      const stock = el.chooser.querySelector('[data-stock-of="' + CSS.escape(id) + '"]');
      if (price) price.textContent = formatMoney(p.price, p.currency, p.currency_digits);
      if (stock) {
        stock.textContent = stockText(p);
        stock.dataset.stock = String(p.gone ? 0 : p.stock);
        stock.classList.toggle('sold-out', !!p.gone || !(p.stock > 0));
      }
    });
  }

  /** renderProduct shows the chosen product: name, price, stock, the per-buyer caps. */
  function renderProduct() {
    const p = offered.get(productId) || null;
    product = p && !p.gone ? p : null;
    if (!p) {
      el.name.textContent = t('order_no_product');
      refreshButton();
      return;
    }
    el.product.dataset.product = p.id;
    el.name.textContent = p.name || p.id;
    el.price.textContent = formatMoney(p.price, p.currency, p.currency_digits);
    el.price.dataset.currency = p.currency || '';
    el.stock.dataset.stock = String(p.gone ? 0 : p.stock);
    el.stock.textContent = stockText(p);
    el.stock.classList.toggle('sold-out', !!p.gone || !(p.stock > 0));
    const maxQty = Math.min(MAX_QTY, p.max_per_order || MAX_QTY);
    el.qty.max = String(maxQty);
    el.caps.textContent = t('order_caps', { order: num.format(maxQty), ticket: num.format(p.max_per_ticket || maxQty) });
    refreshButton();
  }

  /**
   * refresh reads what this queue sells now (one request for every product of the page)
   * and updates the stock, price and caps shown. A product the queue no longer sells is
   * marked gone (never bought from here); one it started selling since the page was made
   * is left for the next visit.
   */
  async function refresh() {
    const res = await fetch(listUrl, { credentials: 'same-origin', headers: { Accept: 'application/json' }, cache: 'no-store' });
    if (!res.ok) throw await readError(res);
    const body = await res.json();
    const now = new Map(((body && body.products) || []).map((p) => [p.id, p]));
    offered.forEach((p, id) => {
      const fresh = now.get(id);
      offered.set(id, fresh ? Object.assign({}, fresh, { gone: false }) : Object.assign({}, p, { gone: true }));
    });
    renderChoices();
    renderProduct();
  }

  function choose(id) {
    if (!offered.has(id) || id === productId) return;
    productId = id;
    el.result.hidden = true;
    el.qty.removeAttribute('aria-invalid');
    renderProduct();
    // The address names the choice, so that a reload shows it again.
    try {
      const u = new URL(window.location.href);
      u.searchParams.set('product', id);
      window.history.replaceState(null, '', u.toString());
    } catch (_) { /* an old browser: the choice is only on the page */ }
  }

  function schedulePoll(ms) {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, ms);
  }

  async function poll() {
    if (document.hidden) return; // resumed by visibilitychange
    let delay = POLL_MS;
    try {
      await refresh();
    } catch (err) {
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
      el.resultText.textContent = t('order_slow_down', { n: num.format(left) });
    };
    tick();
    blockTimer = setInterval(tick, 500);
    refreshButton();
  }

  async function buy(e) {
    e.preventDefault();
    if (!canBuy()) return;
    const qty = Number(el.qty.value);
    const maxQty = Number(el.qty.max) || MAX_QTY;
    if (!Number.isInteger(qty) || qty < 1 || qty > maxQty) {
      showResult('invalid', t('order_qty_invalid', { max: num.format(maxQty) }));
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
      attempt = { key: uuid(), qty, productId, inUse: 0, shown: product };
    }
    attempt.inUse = 0;

    busy = true;
    refreshButton();
    el.buy.setAttribute('aria-busy', 'true');
    showResult('pending', t('order_buying'));
    await send();
  }

  /**
   * send posts the current attempt. A 409 token_in_use (this token is held by
   * another request of ours — a retry that crossed the first, another tab) is
   * not a refusal: that request may still succeed or free the token, so the
   * same attempt (same Idempotency-Key) is sent again after Retry-After,
   * quietly, a few times, while the button stays busy.
   */
  async function send() {
    // The product (and price) the buyer saw when clicking: the attempt's, not whatever the
    // chooser shows now (a 409 retry runs send() again after the choice may have moved).
    const shown = attempt.shown || product;
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
      const bought = attempt;
      attempt = null;
      done = true;
      token = null;
      clearInterval(tokenTimer);
      W.clearToken(queue);
      setTokenState('used');
      finish();
      // The receipt carries the reference (short, with the full id a click away); the full
      // id in the status line wrapped on a phone, so #order-id keeps it for scripts only.
      showResult('success', t('order_success'));
      el.orderId.textContent = order.id || '?';
      showReceipt(order, bought, shown);
      schedulePoll(0);
      return;
    }

    const err = await readError(res);
    if (res.status === 401 && (err.code === 'token_invalid' || err.code === 'token_unknown') && attempt && !attempt.renewed) {
      // The token may have been replaced (a Redis failover lost it and the buyer was admitted
      // again): ask /status once and, if it tells a different token, order with that one.
      // token_revoked and token_expired are final.
      attempt.renewed = true;
      const fresh = await replacementToken();
      if (fresh) {
        token = fresh;
        attempt.key = uuid(); // nothing was ordered with the old token: a new attempt
        setTokenState('valid');
        watchToken();
        await send();
        return;
      }
    }
    if (res.status === 409 && err.code === 'token_in_use' && attempt && attempt.inUse < IN_USE_RETRIES) {
      attempt.inUse++;
      showResult('pending', t('order_in_use'));
      setTimeout(send, retryDelayMs(err.retryAfter == null ? 1 : err.retryAfter));
      return;
    }
    finish();
    if (res.status === 409 && err.code === 'token_in_use') {
      showResult('busy', t('order_busy')); // still held after the retries: same key on the next click
    } else if (res.status === 409 && err.code === 'sold_out') {
      attempt = null;
      showResult('sold_out', t('order_sold_out'));
      schedulePoll(0);
    } else if (res.status === 429) {
      showResult('rate_limited', t('order_slow_down', { n: num.format(err.retryAfter == null ? 1 : err.retryAfter) }));
      blockFor(Math.max(1, err.retryAfter == null ? 1 : err.retryAfter));
    } else if (res.status === 403 && (err.code === 'product_not_on_sale' || err.code === 'token_wrong_queue')) {
      // The product left this queue after the page was made. The token is still good for
      // what its own queue sells: keep it.
      attempt = null;
      const p = offered.get(shown ? shown.id : productId);
      if (p) offered.set(p.id, Object.assign({}, p, { gone: true }));
      renderChoices();
      renderProduct();
      showResult('error', t('order_moved'));
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

  /**
   * replacementToken asks /status once for the caller's token and returns it
   * when it differs from the one this page holds (null otherwise: still the
   * same, no longer admitted, or the call failed).
   */
  async function replacementToken() {
    const old = token && token.token;
    try {
      await W.status(queue);
    } catch (_) {
      return null;
    }
    const next = W.getToken(queue);
    return next && next.token && next.token !== old ? next : null;
  }

  /**
   * showReceipt replaces the form with the receipt: product, quantity, unit
   * price and total in the product's currency (the price the page showed when
   * the buyer clicked), a short reference (the full id in its title and on the
   * copy button), the time in the buyer's time zone. The focus moves to its
   * heading so that a screen reader reads it and a keyboard starts there.
   */
  function showReceipt(order, bought, p) {
    const qty = Number(order.quantity) || (bought && bought.qty) || 1;
    const id = String(order.id || '');
    el.form.hidden = true;
    el.chooser.hidden = true; // the token is used: nothing more to choose
    el.receiptProduct.textContent = (p && (p.name || p.id)) || order.product_id || '';
    el.receiptQty.textContent = num.format(qty);
    if (p) {
      el.receiptUnit.textContent = formatMoney(p.price, p.currency, p.currency_digits);
      el.receiptTotal.textContent = formatMoney((Number(p.price) || 0) * qty, p.currency, p.currency_digits);
      el.receiptTotal.dataset.currency = p.currency || '';
    }
    el.receiptRef.textContent = shortRef(id);
    el.receiptRef.title = id;
    el.receiptRef.dataset.orderId = id;
    const at = order.created_at ? new Date(order.created_at) : new Date();
    el.receiptTime.dateTime = at.toISOString();
    el.receiptTime.textContent = timeFmt.format(at);
    el.copyRef.dataset.ref = id;
    el.copyStatus.textContent = '';
    el.receipt.hidden = false;
    el.receiptTitle.focus();
  }

  async function copyRef() {
    const ref = el.copyRef.dataset.ref || '';
    if (!ref) return;
    try {
      if (!navigator.clipboard || !window.isSecureContext) throw new Error('no clipboard');
      await navigator.clipboard.writeText(ref);
      el.copyStatus.textContent = t('receipt_copied', { ref });
      el.copyStatus.dataset.outcome = 'copied';
    } catch (_) {
      // Plain http, or the permission refused: say the reference so it can be copied by hand.
      el.copyStatus.textContent = t('receipt_copy_failed', { ref });
      el.copyStatus.dataset.outcome = 'failed';
    }
  }

  function finish() {
    busy = false;
    el.buy.removeAttribute('aria-busy');
    refreshButton();
  }

  el.form.addEventListener('submit', buy);
  el.copyRef.addEventListener('click', copyRef);
  el.qty.addEventListener('input', () => el.qty.removeAttribute('aria-invalid'));
  if (!el.chooser.hidden) {
    el.chooser.addEventListener('change', (e) => {
      if (e.target && e.target.name === 'product' && e.target.checked) choose(e.target.value);
    });
  }

  renderChoices();
  renderProduct();
  loadToken();
  schedulePoll(POLL_MS);
})();
