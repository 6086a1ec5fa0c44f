/*
 * report.js — the printable report of a queue, /admin/queues/{queue}/report. Reads
 * GET /admin/api/queues/{queue}/report with the admin token the dashboard keeps in
 * sessionStorage (asks for it when this tab has none), shows the totals, the peaks, the
 * sold-out time and periods, where every place went (joined = admitted + abandoned + left
 * + dropped at the end + still waiting), the wait distribution (SVG bars) and the orders per
 * minute (SVG bars on a time axis that ends at the report's time, never after it).
 * "Download CSV" fetches …/report?format=csv with the token (a link cannot send the
 * header) and saves it through a Blob. An unknown queue (404) is said in words.
 */
(function () {
  'use strict';

  const root = document.getElementById('report');
  const W = window.WaitRoom;
  if (!root || !W) return;
  const { readError, t } = W.util;
  const C = window.WaitRoomCharts;

  const TOKEN_KEY = 'wr_admin_token';
  const lang = document.documentElement.lang || 'en';
  const num = new Intl.NumberFormat(lang);
  const num2 = new Intl.NumberFormat(lang, { maximumFractionDigits: 2 });
  const name = root.dataset.queue || '';
  const $ = (id) => document.getElementById(id);
  const el = {
    error: $('report-error'), status: $('report-status'), body: $('report-body'), span: $('report-span'),
    login: $('report-login'), loginForm: $('report-login-form'), token: $('report-token'),
    csv: $('report-csv'), print: $('report-print'),
    waitChart: $('report-wait-chart'), ordersChart: $('report-orders-chart'), ordersReadout: $('report-orders-readout'),
  };
  const base = '/admin/api/queues/' + encodeURIComponent(name) + '/report';
  let report = null;

  function store() { try { return window.sessionStorage; } catch (_) { return null; } }
  function token() { const s = store(); return (s && s.getItem(TOKEN_KEY)) || ''; }

  function fail(text) {
    el.error.textContent = text;
    el.error.hidden = false;
    el.status.textContent = '';
  }

  function when(iso) {
    const d = new Date(iso);
    if (iso == null || isNaN(d)) return '–';
    return new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'medium' }).format(d);
  }

  function seconds(v) { return typeof v === 'number' ? num2.format(v) + ' s' : '–'; }

  function set(field, text, value) {
    const dd = root.querySelector('[data-field="' + field + '"]');
    if (!dd) return;
    dd.textContent = text;
    dd.dataset.value = value == null ? '' : String(value);
  }

  function askToken(message) {
    el.body.hidden = true;
    el.login.hidden = false;
    if (message) fail(message);
    el.token.focus();
  }

  async function get(path) {
    return fetch(path, { headers: { Authorization: 'Bearer ' + token(), Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' });
  }

  async function load() {
    if (root.dataset.exists !== 'true') { fail(t('report_no_queue', { name })); return; } // the server said: no such queue
    if (!token()) { askToken(''); return; }
    el.status.textContent = t('report_loading');
    let res;
    try {
      res = await get(base);
    } catch (e) {
      fail(t('report_network', { msg: String((e && e.message) || e) }));
      return;
    }
    if (res.status === 401) { askToken(t('report_refused')); return; }
    if (res.status === 404) { fail(t('report_no_queue', { name })); return; }
    if (!res.ok) { const err = await readError(res); fail(t('report_failed', { msg: err.message })); return; }
    report = await res.json();
    el.error.hidden = true;
    el.login.hidden = true;
    render(report);
  }

  function render(r) {
    el.body.hidden = false;
    el.status.textContent = '';
    el.span.textContent = r.from ? t('report_span', { generated: when(r.generated_at), from: when(r.from), to: when(r.to) })
      : t('report_span_none', { generated: when(r.generated_at) });
    for (const k of ['joined', 'drawn', 'admitted', 'bought', 'units', 'abandoned', 'left', 'dropped_at_end', 'still_waiting',
      'expired', 'peak_waiting', 'peak_sse_connections']) {
      set(k, typeof r[k] === 'number' ? num.format(r[k]) : '–', r[k]);
    }
    set('sold_out_at', r.sold_out_at ? when(r.sold_out_at) : t('report_not_sold_out'), r.sold_out_at);
    places(r);
    soldOut(r);
    set('peak_waiting_at', when(r.peak_waiting_at), r.peak_waiting_at);
    set('peak_sse_at', when(r.peak_sse_at), r.peak_sse_at);
    const w = r.wait_seconds || {};
    set('wait_count', typeof w.count === 'number' ? num.format(w.count) : '–', w.count);
    set('wait_p50', seconds(w.p50), w.p50);
    set('wait_p95', seconds(w.p95), w.p95);
    set('wait_p99', seconds(w.p99), w.p99);
    draw();
  }

  /** The identity joined = admitted + abandoned + left + dropped + still waiting, in words. */
  function places(r) {
    const n = (v) => num.format(Number(v) || 0);
    const p = $('report-identity');
    p.textContent = t('report_identity', { joined: n(r.joined), admitted: n(r.admitted), abandoned: n(r.abandoned),
      left: n(r.left), dropped: n(r.dropped_at_end), waiting: n(r.still_waiting) });
    const off = Number(r.unaccounted) || 0;
    p.dataset.addsUp = String(off === 0);
    const u = $('report-unaccounted');
    u.hidden = off === 0;
    u.textContent = off === 0 ? '' : t('report_unaccounted', { n: num.format(off) });
  }

  /** A duration in seconds as "1 min 20 s" (the sold-out periods' lengths). */
  function length(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return num.format(s) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return num.format(m) + ' min' + (s % 60 ? ' ' + num.format(s % 60) + ' s' : '');
    return num.format(Math.floor(m / 60)) + ' h' + (m % 60 ? ' ' + num.format(m % 60) + ' min' : '');
  }

  function soldOut(r) {
    const ps = Array.isArray(r.sold_out_periods) ? r.sold_out_periods : [];
    const list = $('report-soldout-list');
    list.replaceChildren(...ps.map((p) => {
      const li = document.createElement('li');
      li.dataset.from = p.from;
      li.dataset.to = p.to || '';
      li.textContent = p.to ? t('report_period_length', { from: when(p.from), to: when(p.to), length: length(Date.parse(p.to) - Date.parse(p.from)) })
        : t('report_period_open', { from: when(p.from) });
      return li;
    }));
    $('report-soldout').hidden = ps.length === 0;
  }

  function bucketLabel(b, prev) {
    if (b.le_seconds == null) return '> ' + num2.format(prev == null ? 0 : prev) + ' s';
    return '≤ ' + num2.format(b.le_seconds) + ' s';
  }

  function draw() {
    if (!report || !C) return;
    const buckets = (report.wait_seconds && Array.isArray(report.wait_seconds.buckets)) ? report.wait_seconds.buckets : [];
    let prev = null;
    const bars = buckets.map((b) => {
      const bar = { label: bucketLabel(b, prev), value: Number(b.count) || 0 };
      if (b.le_seconds != null) prev = b.le_seconds;
      return bar;
    });
    C.barChart(el.waitChart, bars, (v) => num.format(v));
    el.waitChart.setAttribute('aria-label', t('report_wait_label', { bars: bars.map((b) => b.label + ' ' + num.format(b.value)).join(', ') }));

    const opm = Array.isArray(report.orders_per_minute) ? report.orders_per_minute : [];
    const points = opm.map((p) => ({ t: Date.parse(p.t), orders: Number(p.orders) || 0 })).filter((p) => Number.isFinite(p.t));
    // The axis ends at the report's time, never after it (the running minute's bar is cut
    // there); it starts a minute before the first order, ten minutes back at least.
    const to = Date.parse(report.generated_at);
    const from = points.length ? Math.min(points[0].t - 60000, to - 600000) : to - 3600000;
    C.lineChart(el.ordersChart, {
      from, to, step: 60000, points, bars: true,
      series: [{ label: t('report_bought'), cls: 's0', value: (p) => p.orders }],
      format: (v) => num.format(v), readout: el.ordersReadout,
    });
    const total = points.reduce((a, p) => a + p.orders, 0);
    el.ordersChart.setAttribute('aria-label', t('report_orders_label', { n: num.format(total), m: num.format(points.length) }));
  }

  el.csv.addEventListener('click', async (e) => {
    e.preventDefault();
    el.csv.dataset.state = 'pending';
    let res;
    try {
      res = await fetch(base + '?format=csv', { headers: { Authorization: 'Bearer ' + token(), Accept: 'text/csv' }, cache: 'no-store', credentials: 'same-origin' });
    } catch (err) {
      el.csv.dataset.state = 'error';
      fail(t('report_network', { msg: String((err && err.message) || err) }));
      return;
    }
    if (!res.ok) {
      el.csv.dataset.state = 'error';
      const err = await readError(res);
      fail(t('report_csv_failed', { msg: err.message }));
      return;
    }
    const text = await res.text();
    const blob = new Blob([text], { type: 'text/csv' });
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = 'report-' + name + '.csv';
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    // What was saved, for whoever checks (a test): its size and row count.
    el.csv.dataset.bytes = String(blob.size);
    el.csv.dataset.rows = String(text.split('\n').filter((l) => l !== '').length);
    el.csv.dataset.header = text.split('\n')[0] || '';
    el.csv.dataset.state = 'done';
  });

  el.print.addEventListener('click', () => window.print());
  el.loginForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const v = el.token.value.trim();
    if (!v) return;
    const s = store();
    if (s) s.setItem(TOKEN_KEY, v);
    el.token.value = '';
    el.error.hidden = true;
    load();
  });
  window.addEventListener('resize', draw);
  load();
})();
