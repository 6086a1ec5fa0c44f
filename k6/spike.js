// k6/spike.js — a flash-sale opening: a steady trickle of visitors, then a sudden surge
// (×20 by default within 2 s), held, then back to the trickle. Each visitor joins and
// asks for its place once (what a waiting page does before it opens its stream; streams
// themselves are the Go swarm's job, k6 here has no SSE). Open loop (ramping-arrival-rate),
// so a slow server shows as latency and dropped iterations, not as a politely slower
// client. Reported per phase: latency, status 0 / 4xx / 5xx, and whether the server still
// answers /readyz after the surge.
//
// Drop day: METHOD=random makes the queue a lottery (joins answer position null),
// STARTS_IN=<s> schedules its start (joins before it go to the pre-queue: state
// "prequeue", position null), ENDS_IN=<s> its end. The joins are counted by what they gave
// (join_kind: prequeue / waiting / lottery / admitted); 423 sold_out, queue_ended and
// queue_closed are the sale's final answers and counted apart (visit_refused), not as 4xx.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=… -e BASE_RATE=50 -e SPIKE_RATE=1000 k6/spike.js
//   k6 run -e … -e QUEUE=drop1 -e STARTS_IN=60 k6/spike.js      # the surge into a pre-queue
import http from 'k6/http';
import { Counter, Trend } from 'k6/metrics';
import { BASE, ADMIN_TOKEN, admin, applyDropDay, classOf, joinView, isSaleRefusal, placeKind, metric, fmt, table, summaryOut } from './lib.js';

const BASE_RATE = Number(__ENV.BASE_RATE || 50);
const SPIKE_RATE = Number(__ENV.SPIKE_RATE || 1000);
const QUEUE = __ENV.QUEUE || 'spike';
const PHASES = { before: 10, ramp: 2, spike: Number(__ENV.SPIKE_SECONDS || 15), down: 2, after: 10 };

const visit = new Trend('visit_ms', true);
const c0 = new Counter('visit_status0');
const c4 = new Counter('visit_4xx');
const c5 = new Counter('visit_5xx');
const okc = new Counter('visit_ok');
const refused = new Counter('visit_refused');
const kinds = new Counter('join_kind');
const KINDS = ['prequeue', 'waiting', 'lottery', 'admitted'];

const phaseNames = ['before', 'spike', 'after'];
const th = {};
for (const p of phaseNames) {
  th[`visit_ms{phase:${p}}`] = ['p(95)>=0'];
  th[`visit_ok{phase:${p}}`] = ['count>=0'];
  th[`visit_status0{phase:${p}}`] = ['count>=0'];
  th[`visit_4xx{phase:${p}}`] = ['count>=0'];
  th[`visit_5xx{phase:${p}}`] = ['count>=0'];
}
for (const k of KINDS) th[`join_kind{kind:${k}}`] = ['count>=0'];
th.visit_refused = ['count>=0'];
th.visit_5xx = ['count==0'];
th.visit_status0 = ['count==0'];

export const options = {
  discardResponseBodies: false,
  scenarios: {
    spike: {
      executor: 'ramping-arrival-rate',
      startRate: BASE_RATE,
      timeUnit: '1s',
      preAllocatedVUs: Number(__ENV.VUS || 600),
      maxVUs: Number(__ENV.MAX_VUS || 2000),
      stages: [
        { target: BASE_RATE, duration: `${PHASES.before}s` },
        { target: SPIKE_RATE, duration: `${PHASES.ramp}s` },
        { target: SPIKE_RATE, duration: `${PHASES.spike}s` },
        { target: BASE_RATE, duration: `${PHASES.down}s` },
        { target: BASE_RATE, duration: `${PHASES.after}s` },
      ],
      gracefulStop: '10s',
    },
  },
  thresholds: th,
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
};

export function setup() {
  if (ADMIN_TOKEN) {
    admin('PUT', '/limits', { join_per_ip_per_second: 0, join_global_per_second: 0 });
    admin('PUT', `/queues/${QUEUE}`, { paused: false, rate_per_second: 50, closed: false, places_per_ip: 0 });
    applyDropDay(QUEUE);
  }
  return { start: Date.now() };
}

function phaseAt(ms) {
  const s = ms / 1000;
  if (s < PHASES.before) return 'before';
  if (s < PHASES.before + PHASES.ramp) return 'ramp';
  if (s < PHASES.before + PHASES.ramp + PHASES.spike) return 'spike';
  if (s < PHASES.before + PHASES.ramp + PHASES.spike + PHASES.down) return 'down';
  return 'after';
}

function count(res, tags) {
  if (isSaleRefusal(res)) {
    refused.add(1, { ...tags, code: joinView(res).code || 'unknown' });
    return false;
  }
  const c = classOf(res);
  if (c === 'status0') c0.add(1, tags);
  else if (c === '4xx') c4.add(1, tags);
  else if (c === '5xx') c5.add(1, tags);
  return c === 'ok';
}

export default function (data) {
  const tags = { phase: phaseAt(Date.now() - data.start) };
  const t0 = Date.now();
  const jar = new http.CookieJar();
  const j = http.post(`${BASE}/api/queues/${QUEUE}/join`, null, { jar, tags: { ...tags, name: 'join' } });
  if (!count(j, tags)) return;
  const v = joinView(j);
  kinds.add(1, { kind: placeKind(v) });
  const ticket = v.ticket;
  if (!ticket) { c4.add(1, tags); return; } // a 2xx without a ticket: the contract broken
  const s = http.get(`${BASE}/api/queues/${QUEUE}/status`, { jar, headers: { Authorization: `Bearer ${ticket}` }, tags: { ...tags, name: 'status' } });
  if (!count(s, tags)) return;
  okc.add(1, tags);
  visit.add(Date.now() - t0, tags);
}

export function teardown() {
  const r = http.get(`${BASE}/readyz`, { tags: { name: 'readyz' } });
  console.log(`after the spike /readyz answered ${r.status}`);
}

export function handleSummary(data) {
  const rows = phaseNames.map((p) => {
    const s = `{phase:${p}}`;
    return {
      phase: p, ok: metric(data, `visit_ok${s}`, 'count'), status0: metric(data, `visit_status0${s}`, 'count'),
      http_4xx: metric(data, `visit_4xx${s}`, 'count'), http_5xx: metric(data, `visit_5xx${s}`, 'count'),
      p50_ms: metric(data, `visit_ms${s}`, 'med'), p95_ms: metric(data, `visit_ms${s}`, 'p(95)'),
      p99_ms: metric(data, `visit_ms${s}`, 'p(99)'), max_ms: metric(data, `visit_ms${s}`, 'max'),
    };
  });
  const joins = {};
  for (const k of KINDS) joins[k] = metric(data, `join_kind{kind:${k}}`, 'count');
  const r = {
    base_rate: BASE_RATE, spike_rate: SPIKE_RATE, phases_s: PHASES, rows, joins,
    refused: metric(data, 'visit_refused', 'count'),
    dropped_iterations: metric(data, 'dropped_iterations', 'count'),
    iterations: metric(data, 'iterations', 'count'),
    max_vus: metric(data, 'vus_max', 'value'),
  };
  const text = [
    `== spike: ${BASE_RATE}/s → ${SPIKE_RATE}/s for ${PHASES.spike}s → ${BASE_RATE}/s; visit = join + one status (${BASE})`,
    table([
      ['phase', 'ok visits', 'status0', '4xx', '5xx', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms'],
      ...rows.map((x) => [x.phase, x.ok, x.status0, x.http_4xx, x.http_5xx, fmt(x.p50_ms), fmt(x.p95_ms), fmt(x.p99_ms), fmt(x.max_ms)]),
    ]),
    `joins: ${KINDS.map((k) => `${k} ${joins[k]}`).join(', ')}; refused by the sale (423 sold out / ended / not open): ${r.refused}`,
    `iterations ${r.iterations}, dropped ${r.dropped_iterations} (offered load the client could not send: the server was too slow to free VUs), VUs ${r.max_vus}`,
  ].join('\n');
  return summaryOut(text, r);
}
