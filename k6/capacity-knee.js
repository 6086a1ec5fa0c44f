// k6/capacity-knee.js — where does the order path saturate? Open-loop steps
// (constant-arrival-rate) over POST /api/orders with the rate limiter OFF, every order with
// its own admission token, state reset between steps (stock restored through the admin
// API), the cold start excluded by a warm-up step. The knee is the last step whose success
// rate is intact (seed 003: success first, p95 only as a secondary signal); status 0 (no
// HTTP response) and 5xx are counted apart. It then prints the admission rate the seeds'
// formulas recommend (seed 000: knee minus a margin; seed 001: pool × 1000 ms / service
// time × (1 − margin)).
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=… -e STEPS=25,50,100,200,400 \
//          -e STEP_DURATION=15s -e POOL=20 k6/capacity-knee.js
//
// setup() obtains the tokens first: it joins one ticket per planned order into a private
// queue, admits them all at a high rate, and reads each token from /status. Start the
// server with WR_ORDER_RATE_PER_TICKET=0 WR_ORDER_RATE_GLOBAL=0 WR_JOIN_RATE_PER_IP=0 (the
// script also turns the limits off through the admin API and restores them at the end).
import http from 'k6/http';
import exec from 'k6/execution';
import { sleep } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { BASE, admin, classOf, joinView, placeKind, metric, fmt, table, summaryOut, durationSeconds } from './lib.js';

const STEPS = (__ENV.STEPS || '25,50,100,200,400').split(',').map(Number);
const STEP = __ENV.STEP_DURATION || '15s';
const GAP = __ENV.GAP || '4s'; // reset + quiet time before each step
const WARM_RATE = Number(__ENV.WARM_RATE || 10);
const WARM = __ENV.WARM_DURATION || '5s';
const PRODUCT = __ENV.PRODUCT || 'knee';
const STOCK = Number(__ENV.STOCK || 1000000);
const POOL = Number(__ENV.POOL || 20); // the server's WR_PG_MAX_CONNS
const MARGIN = Number(__ENV.MARGIN || 0.2); // seed 000: 50 TPS knee, 10 TPS margin
const SAFETY = Number(__ENV.SAFETY || 0.3); // seed 001: × (1 − 0.3)
const SUCCESS_MIN = Number(__ENV.SUCCESS_MIN || 0.99);
const QUEUE = __ENV.QUEUE || 'knee';

const stepS = durationSeconds(STEP);
const gapS = durationSeconds(GAP);
const warmS = durationSeconds(WARM);
// Token ranges: warm-up first, then each step in order.
const planned = [WARM_RATE * warmS, ...STEPS.map((r) => r * stepS)];
const offsets = planned.map((_, i) => planned.slice(0, i).reduce((a, b) => a + b, 0));
const TOKENS = Math.ceil(planned.reduce((a, b) => a + b, 0) * 1.02) + 10;

const ok = new Rate('order_success');
const dur = new Trend('order_ms', true);
const c0 = new Counter('order_status0');
const c4 = new Counter('order_4xx');
const c5 = new Counter('order_5xx');
const noToken = new Counter('order_no_token');

function buildScenarios() {
  const sc = {
    warmup: {
      executor: 'constant-arrival-rate', rate: WARM_RATE, timeUnit: '1s', duration: WARM,
      preAllocatedVUs: 10, maxVUs: 50, exec: 'order', tags: { step: 'warmup' }, gracefulStop: '2s',
    },
  };
  let t = warmS + 2;
  STEPS.forEach((rate, i) => {
    sc[`reset_${i}`] = {
      executor: 'per-vu-iterations', vus: 1, iterations: 1, startTime: `${t}s`, maxDuration: `${gapS}s`,
      exec: 'reset', tags: { step: 'reset' },
    };
    t += gapS;
    sc[`step_${i}`] = {
      executor: 'constant-arrival-rate', rate, timeUnit: '1s', duration: STEP, startTime: `${t}s`,
      // VUs made ahead of time: creating one mid-step takes k6 long enough to drop
      // arrivals that the server would have served.
      preAllocatedVUs: Math.min(Math.max(50, rate * 2), 1500), maxVUs: Math.min(Math.max(200, rate * 6), 3000),
      exec: 'order', tags: { step: String(i) }, gracefulStop: '3s',
    };
    t += stepS + 3;
  });
  return sc;
}

function buildThresholds() {
  // Thresholds on sub-metrics make k6 keep them for handleSummary; they never fail.
  const th = {};
  STEPS.forEach((_, i) => {
    th[`order_success{step:${i}}`] = ['rate>=0'];
    th[`order_ms{step:${i}}`] = ['p(95)>=0'];
    th[`order_status0{step:${i}}`] = ['count>=0'];
    th[`order_4xx{step:${i}}`] = ['count>=0'];
    th[`order_5xx{step:${i}}`] = ['count>=0'];
    th[`dropped_iterations{scenario:step_${i}}`] = ['count>=0'];
  });
  return th;
}

export const options = {
  scenarios: buildScenarios(),
  thresholds: buildThresholds(),
  setupTimeout: __ENV.SETUP_TIMEOUT || '600s',
  teardownTimeout: '60s',
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};

function batched(reqs, size) {
  const out = [];
  for (let i = 0; i < reqs.length; i += size) out.push(...http.batch(reqs.slice(i, i + size)));
  return out;
}

export function setup() {
  const oldLimits = admin('GET', '/limits');
  admin('PUT', '/limits', { order_per_ticket_per_second: 0, order_global_per_second: 0, join_per_ip_per_second: 0, join_global_per_second: 0 });
  admin('PUT', `/products/${PRODUCT}`, { name: 'Capacity knee', price: 1000, stock: STOCK, queue: QUEUE, max_per_order: 1, max_per_ticket: 1 });
  admin('PUT', `/queues/${QUEUE}`, { paused: true, rate_per_second: 0, max_active: 0, token_ttl_seconds: 7200, closed: false, places_per_ip: 0 });

  const t0 = Date.now();
  const tickets = [];
  while (tickets.length < TOKENS) {
    const n = Math.min(200, TOKENS - tickets.length);
    const reqs = [];
    for (let i = 0; i < n; i++) {
      reqs.push({ method: 'POST', url: `${BASE}/api/queues/${QUEUE}/join`, body: null,
        params: { jar: new http.CookieJar(), tags: { name: 'setup_join' } } });
    }
    for (const r of http.batch(reqs)) {
      const v = joinView(r);
      if (r.status === 201 && v.ticket) tickets.push(v.ticket);
      else if (r.status === 423) throw new Error(`setup: join refused with 423 ${v.code} (queue ${QUEUE} is sold out, ended or not open)`);
    }
    if (Date.now() - t0 > 300000) throw new Error(`setup: only ${tickets.length} joins in 300 s`);
  }
  // Admit everyone fast, then pause the queue again: a high configured rate costs the
  // admission loop work on every tick, which must not run during the measurement.
  admin('PUT', `/queues/${QUEUE}`, { paused: false, rate_per_second: 5000 });
  const pairs = [];
  let pending = tickets;
  for (let round = 0; pending.length > 0 && round < 60; round++) {
    sleep(round === 0 ? 1 : 0.5);
    const reqs = pending.map((t) => ({ method: 'GET', url: `${BASE}/api/queues/${QUEUE}/status`, params: {
      headers: { Authorization: `Bearer ${t}` }, jar: new http.CookieJar(), tags: { name: 'setup_status' } } }));
    const res = batched(reqs, 200);
    const next = [];
    const states = {};
    res.forEach((r, i) => {
      const v = joinView(r);
      if (r.status === 200 && v.state === 'admitted' && v.token) pairs.push([pending[i], v.token]);
      else {
        next.push(pending[i]);
        const k = placeKind(v);
        states[k] = (states[k] || 0) + 1;
      }
    });
    pending = next;
    // A queue scheduled to start later keeps its tickets in the pre-queue (position null);
    // one sold out keeps them waiting. Say so instead of waiting silently.
    if (pending.length && (states.prequeue || states.sold_out) && round % 10 === 9) {
      console.warn(`setup: ${pending.length} tickets not admitted yet: ${JSON.stringify(states)}`);
    }
  }
  admin('PUT', `/queues/${QUEUE}`, { paused: true, rate_per_second: 0 });
  console.log(`setup: ${pairs.length} tokens for ${TOKENS} planned orders in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { pairs, oldLimits };
}

export function reset() {
  admin('PUT', `/products/${PRODUCT}`, { stock: STOCK });
  sleep(Math.max(0, gapS - 1));
}

export function order(data) {
  const name = exec.scenario.name;
  const step = name === 'warmup' ? 0 : Number(name.split('_')[1]) + 1;
  const idx = offsets[step] + exec.scenario.iterationInTest;
  if (idx >= data.pairs.length || (step + 1 < offsets.length && idx >= offsets[step + 1])) {
    noToken.add(1);
    return;
  }
  const [ticket, token] = data.pairs[idx];
  const res = http.post(`${BASE}/api/orders`, JSON.stringify({ product_id: PRODUCT, quantity: 1 }), {
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ticket}`, 'X-Admission-Token': token, 'Idempotency-Key': `knee-${idx}` },
    jar: new http.CookieJar(),
    tags: { name: 'order' },
    timeout: '30s',
  });
  const c = classOf(res);
  ok.add(res.status === 201);
  if (c === 'status0') c0.add(1);
  else if (c === '4xx') c4.add(1);
  else if (c === '5xx') c5.add(1);
  if (res.status !== 0) dur.add(res.timings.duration);
}

export function teardown(data) {
  if (data && data.oldLimits) admin('PUT', '/limits', data.oldLimits);
}

export function handleSummary(data) {
  const rows = STEPS.map((rate, i) => {
    const s = `{step:${i}}`;
    const passes = metric(data, `order_success${s}`, 'passes');
    const fails = metric(data, `order_success${s}`, 'fails');
    const attempts = passes + fails;
    return {
      rate, attempts, ok: passes, success: attempts ? passes / attempts : 0, tps: passes / stepS,
      dropped: metric(data, `dropped_iterations{scenario:step_${i}}`, 'count'),
      status0: metric(data, `order_status0${s}`, 'count'),
      http_4xx: metric(data, `order_4xx${s}`, 'count'),
      http_5xx: metric(data, `order_5xx${s}`, 'count'),
      mean_ms: metric(data, `order_ms${s}`, 'avg'),
      p50_ms: metric(data, `order_ms${s}`, 'med'),
      p95_ms: metric(data, `order_ms${s}`, 'p(95)'),
      p99_ms: metric(data, `order_ms${s}`, 'p(99)'),
    };
  });
  // The knee: the last step, in order, whose success rate is intact and whose offered
  // load was really sent (dropped iterations mean the client ran out of VUs waiting).
  let knee = null;
  for (const r of rows) {
    r.intact = r.attempts > 0 && r.success >= SUCCESS_MIN && r.dropped <= 0.01 * r.rate * stepS;
    if (!r.intact) break;
    knee = r;
  }
  const rec = {};
  if (knee) {
    rec.knee_rate = knee.rate;
    rec.knee_tps = knee.tps;
    rec.seed000_admit_per_s = Math.floor(knee.tps * (1 - MARGIN));
    // Service time: the lowest mean latency of an intact step (the lightest load is
    // usually it; the first step can still carry some cold start).
    const service = Math.min(...rows.filter((r) => r.intact && r.mean_ms > 0).map((r) => r.mean_ms));
    rec.service_ms = service;
    rec.seed001_admit_per_s = service > 0 ? Math.floor(POOL * (1000 / service) * (1 - SAFETY)) : null;
    rec.recommended_admit_per_s = rec.seed001_admit_per_s === null ? rec.seed000_admit_per_s : Math.min(rec.seed000_admit_per_s, rec.seed001_admit_per_s);
  }
  const text = [
    `== capacity-knee: order path, limiter off, ${STEP} per step, state reset between steps (${BASE})`,
    table([
      ['offered/s', 'attempts', 'ok', 'success %', 'ok TPS', 'dropped', 'status0', '4xx', '5xx', 'mean ms', 'p50 ms', 'p95 ms', 'p99 ms', 'intact'],
      ...rows.map((r) => [r.rate, r.attempts, r.ok, fmt(r.success * 100, 2), fmt(r.tps), r.dropped, r.status0, r.http_4xx, r.http_5xx,
        fmt(r.mean_ms), fmt(r.p50_ms), fmt(r.p95_ms), fmt(r.p99_ms), r.intact ? 'yes' : 'no']),
    ]),
    knee
      ? [`knee: ${knee.rate}/s offered, ${fmt(knee.tps)} successful orders/s (last step with success ≥ ${SUCCESS_MIN * 100}% and < 1% dropped)`,
        `seed 000 (knee − ${MARGIN * 100}% margin): admit ${rec.seed000_admit_per_s} users/s`,
        `seed 001 (pool ${POOL} × 1000 ms / ${fmt(rec.service_ms)} ms service × ${1 - SAFETY}): admit ${rec.seed001_admit_per_s} users/s`,
        `recommended admission rate: ${rec.recommended_admit_per_s} users/s (the lower of the two)`].join('\n')
      : 'knee: not reached — even the first step lost requests; lower STEPS',
    rows[rows.length - 1].intact ? 'note: the last step was still intact — the knee lies higher; raise STEPS' : '',
  ].join('\n');
  return summaryOut(text, { steps: rows, step_seconds: stepS, pool: POOL, success_min: SUCCESS_MIN, ...rec });
}
