// k6/join-rate.js — open-loop joins: constant-arrival-rate over POST /api/queues/{q}/join.
// Every iteration is a new user (no cookie carried over), so each one takes a new place.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=… -e RATE=4000 -e DURATION=30s k6/join-rate.js
//
// Target (issue 7): ≥ 4,000 joins/s with 0 dropped iterations and p99 ≤ 50 ms. Run the server
// with WR_JOIN_RATE_PER_IP=0 (the script also turns the join limits off through the admin
// API when ADMIN_TOKEN is given), or the per-IP limit answers 429.
//
// Drop day: METHOD=random (a lottery), STARTS_IN=<s> (joins go to the pre-queue before a
// scheduled start: 201, state "prequeue", position null) and ENDS_IN=<s> set the queue up
// through the admin API (a start needs a queue nobody waits in: pick a fresh QUEUE). A 423
// (sold_out, queue_ended, queue_closed) is the sale's final answer: counted apart
// (join_refused), not as a 4xx, and it fails the run (nothing was measured).
import http from 'k6/http';
import { Counter } from 'k6/metrics';
import { BASE, ADMIN_TOKEN, admin, applyDropDay, classOf, metric, fmt, table, summaryOut, durationSeconds } from './lib.js';

const RATE = Number(__ENV.RATE || 4000);
const DURATION = __ENV.DURATION || '30s';
const QUEUE = __ENV.QUEUE || 'joinrate';

const outcome = {
  created: new Counter('join_created'),
  status0: new Counter('join_status0'),
  c4xx: new Counter('join_4xx'),
  c5xx: new Counter('join_5xx'),
  refused: new Counter('join_refused'),
};

export const options = {
  discardResponseBodies: true,
  scenarios: {
    joins: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: Number(__ENV.VUS || Math.max(50, Math.ceil(RATE / 20))),
      maxVUs: Number(__ENV.MAX_VUS || Math.max(200, Math.ceil(RATE / 4))),
      gracefulStop: '5s',
    },
  },
  thresholds: {
    'http_req_duration{name:join}': ['p(99)<50'],
    dropped_iterations: ['count==0'],
    join_status0: ['count==0'],
    join_5xx: ['count==0'],
    join_4xx: ['count==0'],
    join_refused: ['count==0'],
    join_created: ['count>0'],
  },
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};

export function setup() {
  if (ADMIN_TOKEN) {
    admin('PUT', '/limits', { join_per_ip_per_second: 0, join_global_per_second: 0 });
    // Paused: this measures joining, not admission.
    admin('PUT', `/queues/${QUEUE}`, { paused: true, rate_per_second: 0, closed: false, places_per_ip: 0 });
    applyDropDay(QUEUE);
  }
  return { queue: QUEUE };
}

export default function (data) {
  const res = http.post(`${BASE}/api/queues/${data.queue}/join`, null, {
    jar: new http.CookieJar(), // a new user every time: never resend the ticket cookie
    tags: { name: 'join' },
  });
  const c = classOf(res);
  if (c === 'ok') {
    if (res.status === 201) outcome.created.add(1); // waiting, prequeue, or a lottery place alike
  } else if (res.status === 423) {
    outcome.refused.add(1); // sold out, ended or not open (bodies are discarded: the code is not read)
  } else {
    outcome[c === '4xx' ? 'c4xx' : c === '5xx' ? 'c5xx' : 'status0'].add(1);
  }
}

export function handleSummary(data) {
  const secs = durationSeconds(DURATION);
  const d = (f) => metric(data, 'http_req_duration{name:join}', f);
  const r = {
    target_rate: RATE,
    duration_s: secs,
    iterations: metric(data, 'iterations', 'count'),
    achieved_per_s: metric(data, 'iterations', 'count') / secs,
    created: metric(data, 'join_created', 'count'),
    dropped_iterations: metric(data, 'dropped_iterations', 'count'),
    status0: metric(data, 'join_status0', 'count'),
    http_4xx: metric(data, 'join_4xx', 'count'),
    http_5xx: metric(data, 'join_5xx', 'count'),
    refused_423: metric(data, 'join_refused', 'count'),
    latency_ms: { avg: d('avg'), p50: d('med'), p90: d('p(90)'), p95: d('p(95)'), p99: d('p(99)'), max: d('max') },
    max_vus: metric(data, 'vus_max', 'value'),
  };
  r.pass = r.dropped_iterations === 0 && r.latency_ms.p99 <= 50 && r.status0 + r.http_4xx + r.http_5xx + r.refused_423 === 0;
  const text = [
    `== join-rate: ${RATE}/s for ${DURATION} against ${BASE}`,
    table([
      ['target/s', 'achieved/s', 'created', 'dropped', 'status0', '4xx', '423', '5xx', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'VUs'],
      [RATE, fmt(r.achieved_per_s), r.created, r.dropped_iterations, r.status0, r.http_4xx, r.refused_423, r.http_5xx,
        fmt(r.latency_ms.p50, 2), fmt(r.latency_ms.p95, 2), fmt(r.latency_ms.p99, 2), fmt(r.latency_ms.max, 2), r.max_vus],
    ]),
    `target ≥ 4000/s, 0 dropped, p99 ≤ 50 ms: ${r.pass ? 'met' : 'NOT met'}`,
    r.refused_423 ? `${r.refused_423} joins refused with 423 (the queue is sold out, ended or not open): the run measured refusals` : '',
  ].join('\n');
  return summaryOut(text, r);
}
