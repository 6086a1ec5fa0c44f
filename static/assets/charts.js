/*
 * charts.js — small inline-SVG charts for the dashboard and the report page (no library:
 * nothing is fetched at run time). A line chart draws points on a real time axis (ticks in
 * the browser's local time), a y axis with ticks, and breaks its lines where a step has no
 * point (a resting queue records nothing: a gap, never a line across it). Hover or keyboard
 * focus (←/→, Home/End) picks the nearest point and writes its values into a readout.
 * A bar chart draws labelled bars (the report's wait distribution). Time-axis labels never
 * overlap: the tick spacing is the smallest whose widest label (measured in the SVG, or
 * estimated when it is not rendered) fits its slot with a gap.
 *
 * Only SVG presentation attributes and classes are used: the pages' CSP forbids inline
 * styles.
 */
(function () {
  'use strict';

  const NS = 'http://www.w3.org/2000/svg';
  const lang = document.documentElement.lang || 'en';
  const MIN = 60000;
  const HOUR = 60 * MIN;
  const DAY = 24 * HOUR;
  // Tick spacings of the time axis, from 10 s to a week.
  const TIME_STEPS = [10000, 30000, MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR,
    3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 4 * DAY, 7 * DAY];

  function make(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    if (attrs) for (const k of Object.keys(attrs)) e.setAttribute(k, String(attrs[k]));
    if (text != null) e.textContent = text;
    return e;
  }

  const compact = new Intl.NumberFormat(lang, { notation: 'compact', maximumFractionDigits: 1 });
  const plain = new Intl.NumberFormat(lang, { maximumFractionDigits: 2 });

  /** Round-number ticks from 0 to at least max (n about 4). */
  function niceTicks(max, n) {
    if (!(max > 0)) return [0, 1];
    const raw = max / Math.max(1, n);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let v = 0; v < max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
    if (out.length < 2) out.push(step);
    return out;
  }

  /** The local-time offset (ms) of instant t: local = t − offset. */
  function tzOffset(t) { return new Date(t).getTimezoneOffset() * MIN; }

  /** Tick instants between from and to, aligned in local time, at most maxTicks of them
   * (or every step's when step is given). */
  function timeTicks(from, to, maxTicks, step) {
    const span = to - from;
    step = step || TIME_STEPS.find((s) => span / s <= maxTicks) || TIME_STEPS[TIME_STEPS.length - 1];
    const out = [];
    // Align to the step in local time (a 1 h tick falls on a local hour, a day on midnight).
    const localFrom = from - tzOffset(from);
    let t = Math.ceil(localFrom / step) * step + tzOffset(from);
    for (; t <= to; t += step) {
      // Across a DST change keep ticks on local boundaries.
      const fix = tzOffset(t) - tzOffset(from);
      out.push(step >= HOUR ? t + fix : t);
    }
    return { ticks: out, step };
  }

  function timeLabel(t, step, span) {
    const d = new Date(t);
    const opts = step < MIN ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { hour: '2-digit', minute: '2-digit' };
    if (step >= DAY) return new Intl.DateTimeFormat(lang, { month: 'short', day: 'numeric' }).format(d);
    if (span > DAY) return new Intl.DateTimeFormat(lang, Object.assign({ weekday: 'short' }, opts)).format(d);
    return new Intl.DateTimeFormat(lang, opts).format(d);
  }

  // A tick label's width in px: measured in svg when it is rendered, else estimated from
  // its characters at the tick font (11 px; a CJK character is about one em wide).
  const GAP = 10;
  function labelWidth(svg, text) {
    let w = 0;
    if (svg.isConnected && svg.getClientRects().length) {
      const probe = make('text', { class: 'tick tick-x', x: -1000, y: -1000 }, text);
      svg.append(probe);
      try { w = probe.getComputedTextLength(); } catch (_) { w = 0; }
      probe.remove();
    }
    if (w > 0) return w;
    let e = 0;
    for (const ch of text) e += ch.charCodeAt(0) > 0x2e80 ? 11 : 6.6;
    return e;
  }

  /** The time ticks for a plot pw px wide whose labels do not overlap: the smallest tick
   * step whose every label, centred on its tick, keeps GAP px from its neighbours. */
  function fitTimeTicks(svg, from, to, pw) {
    const span = to - from;
    const maxTicks = Math.max(2, Math.floor(pw / 40));
    for (const step of TIME_STEPS) {
      if (span / step > maxTicks) continue;
      const tt = timeTicks(from, to, 0, step);
      const labels = tt.ticks.map((t) => timeLabel(t, step, span));
      const slot = (step / span) * pw;
      const widest = labels.reduce((m, l) => Math.max(m, labelWidth(svg, l)), 0);
      if (tt.ticks.length <= 1 || widest + GAP <= slot) return { ticks: tt.ticks, step, labels, widest };
    }
    const step = TIME_STEPS[TIME_STEPS.length - 1];
    const tt = timeTicks(from, to, 0, step);
    return { ticks: tt.ticks, step, labels: tt.ticks.map((t) => timeLabel(t, step, span)), widest: 0 };
  }

  function fullTime(t) {
    return new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'medium' }).format(new Date(t));
  }

  function svgSize(svg, fallbackH) {
    const r = svg.getBoundingClientRect();
    const w = Math.max(160, Math.round(r.width || svg.clientWidth || 300));
    const h = Math.max(80, Math.round(r.height || svg.clientHeight || fallbackH));
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    return { w, h };
  }

  /**
   * Draws a line chart into svg (or, with opts.bars, one series as a bar per step).
   * opts: {from, to, step (ms), points: [{t (ms), …}], series: [{label, cls, value(p) → number|null}], bars,
   *        format(v) → text, extra(p) → text or '' (added to the readout), readout: element}
   * Sets data-points (points drawn), data-segments (unbroken runs) on the svg.
   */
  function lineChart(svg, opts) {
    const { w, h } = svgSize(svg, 140);
    const keep = svg.dataset.selected || '';
    const m = { l: 46, r: 10, t: 8, b: 22 };
    const pw = w - m.l - m.r;
    const ph = h - m.t - m.b;
    const from = opts.from;
    const to = Math.max(opts.to, from + 1);
    const pts = (opts.points || []).filter((p) => p.t >= from && p.t <= to).sort((a, b) => a.t - b.t);
    const fmt = opts.format || ((v) => plain.format(v));
    let max = 0;
    for (const p of pts) for (const s of opts.series) { const v = s.value(p); if (v != null && v > max) max = v; }
    const yt = niceTicks(max, 3);
    const ymax = yt[yt.length - 1] || 1;
    const x = (t) => m.l + ((t - from) / (to - from)) * pw;
    const y = (v) => m.t + ph - (v / ymax) * ph;

    const nodes = [];
    const grid = make('g', { class: 'chart-grid', 'aria-hidden': 'true' });
    for (const v of yt) {
      const yy = Math.round(y(v)) + 0.5;
      grid.append(make('line', { x1: m.l, x2: w - m.r, y1: yy, y2: yy, class: 'grid-line' }));
      grid.append(make('text', { x: m.l - 6, y: yy + 4, 'text-anchor': 'end', class: 'tick tick-y' }, compact.format(v)));
    }
    svg.replaceChildren();
    const tt = fitTimeTicks(svg, from, to, pw);
    tt.ticks.forEach((t, i) => {
      const xx = Math.round(x(t)) + 0.5;
      grid.append(make('line', { x1: xx, x2: xx, y1: m.t + ph, y2: m.t + ph + 4, class: 'axis-line' }));
      // Labels are centred on their ticks (the step keeps them apart); one that would cross
      // the chart's edge is anchored inwards, and left out (its tick stays) if it would then
      // run into its neighbour.
      const half = tt.widest / 2;
      const slot = (tt.step / (to - from)) * pw;
      let anchor = 'middle';
      if (xx + half > w) anchor = 'end';
      else if (xx - half < 0) anchor = 'start';
      if (anchor !== 'middle' && tt.ticks.length > 1 && tt.widest + half + GAP > slot) return;
      grid.append(make('text', { x: xx, y: h - 6, 'text-anchor': anchor, class: 'tick tick-x', 'data-t': new Date(t).toISOString() },
        tt.labels[i]));
    });
    grid.append(make('line', { x1: m.l, x2: w - m.r, y1: m.t + ph + 0.5, y2: m.t + ph + 0.5, class: 'axis-line' }));
    nodes.push(grid);

    // A step with no point breaks the line: consecutive points more than 1.5 steps apart
    // are not joined.
    const gap = (opts.step || 10000) * 1.5;
    let segments = 0;
    if (opts.bars) {
      // Counts per step as bars (the report's orders per minute): each bar spans its step,
      // cut at the axis' end (a step still running ends now).
      const s0 = opts.series[0];
      for (const p of pts) {
        const v = s0.value(p);
        if (v == null) continue;
        const bw = Math.max(2, (Math.min(opts.step || 60000, to - p.t) / (to - from)) * pw * 0.8);
        nodes.push(make('rect', { x: x(p.t).toFixed(1), y: y(v).toFixed(1), width: bw.toFixed(1),
          height: Math.max(0, y(0) - y(v)).toFixed(1), class: 'bar ' + (s0.cls || 's0') }));
      }
    }
    opts.series.forEach((s, si) => {
      if (opts.bars) return;
      let d = '';
      let run = [];
      // A run of one point has no line to draw: it is a dot.
      const flush = () => {
        if (run.length === 1) nodes.push(make('circle', { cx: run[0][0], cy: run[0][1], r: 2.5, class: 'series-dot ' + (s.cls || 's' + si) }));
        else if (run.length) d += run.map((xy, i) => (i ? 'L' : 'M') + xy[0] + ' ' + xy[1]).join('');
        if (run.length) segments += si === 0 ? 1 : 0;
        run = [];
      };
      let prevT = null;
      for (const p of pts) {
        const v = s.value(p);
        if (v == null || (prevT != null && p.t - prevT > gap)) flush();
        prevT = p.t;
        if (v == null) { prevT = null; continue; }
        run.push([x(p.t).toFixed(1), y(v).toFixed(1)]);
      }
      flush();
      if (d) nodes.push(make('path', { d, class: 'series ' + (s.cls || 's' + si), fill: 'none' }));
    });

    const cursor = make('g', { class: 'chart-cursor', visibility: 'hidden', 'aria-hidden': 'true' });
    const cline = make('line', { y1: m.t, y2: m.t + ph, class: 'cursor-line' });
    cursor.append(cline);
    const dots = opts.series.map((s, si) => { const c = make('circle', { r: 3.5, class: 'cursor-dot ' + (s.cls || 's' + si) }); cursor.append(c); return c; });
    nodes.push(cursor);
    // A transparent rectangle catches the pointer over the whole plot.
    const hit = make('rect', { x: m.l, y: m.t, width: pw, height: ph, fill: 'transparent', class: 'chart-hit' });
    nodes.push(hit);
    svg.replaceChildren(...nodes);
    // What was drawn, for whoever checks the chart against its data (the browser tests):
    // the plot's geometry, each point's time and its first series' value.
    svg.dataset.points = String(pts.length);
    svg.dataset.segments = String(segments);
    svg.dataset.ymax = String(ymax);
    svg.dataset.plot = [from, to, m.l, pw, w].join(',');
    svg.dataset.times = pts.map((p) => new Date(p.t).toISOString()).join(',');
    svg.dataset.values = pts.map((p) => { const v = opts.series[0].value(p); return v == null ? '' : String(v); }).join(',');

    let sel = -1;
    function show(i) {
      sel = i;
      if (i < 0 || i >= pts.length) {
        cursor.setAttribute('visibility', 'hidden');
        if (opts.readout) opts.readout.textContent = opts.empty || '';
        svg.removeAttribute('data-selected');
        return;
      }
      const p = pts[i];
      const xx = x(p.t);
      cline.setAttribute('x1', xx);
      cline.setAttribute('x2', xx);
      const parts = [];
      opts.series.forEach((s, si) => {
        const v = s.value(p);
        dots[si].setAttribute('visibility', v == null ? 'hidden' : 'visible');
        if (v != null) { dots[si].setAttribute('cx', xx); dots[si].setAttribute('cy', y(v)); }
        parts.push(s.label + ' ' + (v == null ? '–' : fmt(v)));
      });
      cursor.setAttribute('visibility', 'visible');
      const extra = opts.extra ? opts.extra(p) : '';
      if (opts.readout) opts.readout.textContent = fullTime(p.t) + ': ' + parts.join(' · ') + (extra ? ' · ' + extra : '');
      svg.dataset.selected = new Date(p.t).toISOString();
    }
    function nearest(clientX) {
      if (!pts.length) return -1;
      const r = svg.getBoundingClientRect();
      const t = from + ((clientX - r.left) * (w / r.width) - m.l) / pw * (to - from);
      let lo = 0;
      let hi = pts.length - 1;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (pts[mid].t < t) lo = mid + 1; else hi = mid; }
      if (lo > 0 && Math.abs(pts[lo - 1].t - t) <= Math.abs(pts[lo].t - t)) lo--;
      return lo;
    }
    svg.onpointermove = (e) => show(nearest(e.clientX));
    svg.onpointerleave = () => { if (document.activeElement !== svg) show(-1); };
    svg.onfocus = () => show(sel >= 0 && sel < pts.length ? sel : pts.length - 1);
    svg.onblur = () => show(-1);
    svg.onkeydown = (e) => {
      if (!pts.length) return;
      let i = sel < 0 ? pts.length - 1 : sel;
      if (e.key === 'ArrowLeft') i = Math.max(0, i - 1);
      else if (e.key === 'ArrowRight') i = Math.min(pts.length - 1, i + 1);
      else if (e.key === 'Home') i = 0;
      else if (e.key === 'End') i = pts.length - 1;
      else return;
      e.preventDefault();
      show(i);
    };
    if (!svg.hasAttribute('tabindex')) svg.setAttribute('tabindex', '0');
    // A redraw (new data every few seconds) keeps the point being looked at.
    const kept = keep ? pts.findIndex((p) => new Date(p.t).toISOString() === keep) : -1;
    show(kept >= 0 ? kept : document.activeElement === svg ? pts.length - 1 : -1);
    return { show, count: pts.length };
  }

  /**
   * Draws labelled vertical bars: bars [{label, value}], format(v) → text. Each bar carries
   * its value as data-value and a <title> for hover.
   */
  function barChart(svg, bars, format) {
    const { w, h } = svgSize(svg, 180);
    const m = { l: 46, r: 8, t: 16, b: 24 };
    const pw = w - m.l - m.r;
    const ph = h - m.t - m.b;
    const fmt = format || ((v) => plain.format(v));
    let max = 0;
    for (const b of bars) if (b.value > max) max = b.value;
    const yt = niceTicks(max, 3);
    const ymax = yt[yt.length - 1] || 1;
    const y = (v) => m.t + ph - (v / ymax) * ph;
    const nodes = [];
    for (const v of yt) {
      const yy = Math.round(y(v)) + 0.5;
      nodes.push(make('line', { x1: m.l, x2: w - m.r, y1: yy, y2: yy, class: 'grid-line' }));
      nodes.push(make('text', { x: m.l - 6, y: yy + 4, 'text-anchor': 'end', class: 'tick tick-y' }, compact.format(v)));
    }
    const slot = pw / Math.max(1, bars.length);
    const bw = Math.max(2, Math.min(48, slot * 0.7));
    svg.replaceChildren();
    const widest = bars.reduce((m, b) => Math.max(m, labelWidth(svg, b.label)), 0);
    const every = Math.max(1, Math.ceil((widest + GAP) / slot));
    bars.forEach((b, i) => {
      const cx = m.l + slot * i + slot / 2;
      const rect = make('rect', { x: (cx - bw / 2).toFixed(1), y: y(b.value).toFixed(1), width: bw.toFixed(1),
        height: Math.max(0, m.t + ph - y(b.value)).toFixed(1), class: 'bar', 'data-value': b.value, 'data-label': b.label });
      rect.append(make('title', null, b.label + ': ' + fmt(b.value)));
      nodes.push(rect);
      if (b.value > 0) nodes.push(make('text', { x: cx, y: y(b.value) - 3, 'text-anchor': 'middle', class: 'tick bar-value' }, compact.format(b.value)));
      // Labels thin out when the bars are narrow: every k-th, k the smallest that keeps the
      // widest label GAP px from the next one shown.
      if (i % every === 0) nodes.push(make('text', { x: cx, y: h - 6, 'text-anchor': 'middle', class: 'tick tick-x' }, b.label));
    });
    nodes.push(make('line', { x1: m.l, x2: w - m.r, y1: m.t + ph + 0.5, y2: m.t + ph + 0.5, class: 'axis-line' }));
    svg.replaceChildren(...nodes);
    svg.dataset.bars = String(bars.length);
  }

  window.WaitRoomCharts = Object.freeze({ lineChart, barChart, niceTicks, timeTicks, fullTime });
})();
