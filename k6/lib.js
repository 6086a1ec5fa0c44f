// Helpers shared by the k6 scripts: loopback-only targets, the admin API, small
// formatting for handleSummary (jslib's textSummary needs the network, so the scripts
// print their own tables).
import http from 'k6/http';

export const BASE = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
export const ADMIN_TOKEN = __ENV.ADMIN_TOKEN || __ENV.WR_ADMIN_TOKEN || '';

// Refuse anything but this machine: load is only ever sent to 127.0.0.0/8 or ::1.
const host = (BASE.match(/^http:\/\/(\[[^\]]+\]|[^/:]+)(:\d+)?$/) || [])[1];
if (!host || !(host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host))) {
  throw new Error(`BASE_URL=${BASE}: only http://127.x.x.x:port, localhost or [::1] are allowed`);
}

export function admin(method, path, body) {
  if (!ADMIN_TOKEN) throw new Error('ADMIN_TOKEN is required (the server\'s WR_ADMIN_TOKEN)');
  const res = http.request(method, `${BASE}/admin/api${path}`, body === undefined ? null : JSON.stringify(body), {
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    tags: { name: 'admin' },
  });
  if (res.status >= 300) throw new Error(`admin ${method} ${path}: ${res.status} ${res.body}`);
  return res.body ? JSON.parse(res.body) : null;
}

// classify counts a response as ok / status 0 (no HTTP response) / 4xx / 5xx.
export function classOf(res) {
  if (res.status === 0) return 'status0';
  if (res.status >= 500) return '5xx';
  if (res.status >= 400) return '4xx';
  return 'ok';
}

export function metric(data, name, field, dflt = 0) {
  const m = data.metrics[name];
  if (!m || m.values[field] === undefined) return dflt;
  return m.values[field];
}

export function fmt(n, digits = 1) {
  if (n === undefined || n === null || Number.isNaN(n)) return '-';
  return Number(n).toFixed(digits);
}

export function table(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows.map((r) => r.map((c, i) => String(c).padEnd(widths[i])).join('  ')).join('\n');
}

export function durationSeconds(s) {
  const m = String(s).match(/^(\d+(?:\.\d+)?)(ms|s|m|h)$/);
  if (!m) throw new Error(`bad duration ${s}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
}

// summaryOut writes the JSON summary to SUMMARY_JSON (when set) and the text to stdout.
export function summaryOut(text, json) {
  const out = { stdout: text + '\n' };
  if (__ENV.SUMMARY_JSON) out[__ENV.SUMMARY_JSON] = JSON.stringify(json, null, 2);
  return out;
}

// ---------- drop day: scheduled, lottery and sold-out queues ----------

// The final refusals of a join (423): the queue sold out, the sale ended, or it is not open
// (closed, or method reject). They are the sale's answer, not a server failure: the
// scripts count them apart from other 4xx, and never retry them.
export const SALE_REFUSALS = ['sold_out', 'queue_ended', 'queue_closed'];

// joinView reads a join or status answer without throwing (a body that is not JSON, or
// discarded, gives nulls): {status, state, position, waiting, ticket, token, code, soldOut}.
// position is a number in a FIFO line and null in a pre-queue (before a scheduled start)
// and in a lottery (method random), where only `waiting` is known.
export function joinView(res) {
  const v = { status: res.status, state: null, position: null, waiting: null, ticket: null, token: null, code: null, soldOut: false };
  let body = null;
  try { body = typeof res.body === 'string' && res.body !== '' ? JSON.parse(res.body) : null; } catch (_) { body = null; }
  if (!body || typeof body !== 'object') return v;
  if (body.error && typeof body.error.code === 'string') v.code = body.error.code;
  if (typeof body.state === 'string') v.state = body.state;
  if (typeof body.position === 'number') v.position = body.position;
  if (typeof body.waiting === 'number') v.waiting = body.waiting;
  if (typeof body.ticket === 'string') v.ticket = body.ticket;
  if (typeof body.token === 'string') v.token = body.token;
  v.soldOut = body.sold_out === true;
  return v;
}

// placeKind names what a join or status answer gave: 'prequeue' (before the start),
// 'lottery' (waiting without a place number), 'waiting' (a place in line), 'admitted'
// (a passthrough queue admits at the join), 'sold_out' (a place kept while the queue is sold
// out), or the error code / 'other'.
export function placeKind(v) {
  if (v.code) return v.code;
  if (v.soldOut && v.state !== 'admitted') return 'sold_out';
  if (v.state === 'prequeue') return 'prequeue';
  if (v.state === 'admitted') return 'admitted';
  if (v.state === 'waiting') return v.position === null ? 'lottery' : 'waiting';
  return v.state || 'other';
}

// isSaleRefusal: a 423 whose code is one of SALE_REFUSALS (or any 423 when the body was
// discarded and the code is unknown).
export function isSaleRefusal(res, v) {
  if (res.status !== 423) return false;
  const code = (v || joinView(res)).code;
  return code === null || SALE_REFUSALS.includes(code);
}

// dropDaySettings turns METHOD (fifo|random|passthrough|reject), STARTS_IN and ENDS_IN
// (seconds from now) into queue settings for the admin PUT, so a run can load a lottery or
// a scheduled queue: joins before the start go to the pre-queue (state "prequeue",
// position null). A start can only be set on a queue nobody waits in: use a fresh QUEUE.
export function dropDaySettings() {
  const s = {};
  if (__ENV.METHOD) s.method = __ENV.METHOD;
  if (__ENV.STARTS_IN) s.starts_at = new Date(Date.now() + Number(__ENV.STARTS_IN) * 1000).toISOString();
  if (__ENV.ENDS_IN) s.ends_at = new Date(Date.now() + Number(__ENV.ENDS_IN) * 1000).toISOString();
  return s;
}

// applyDropDay PUTs dropDaySettings() on queue (nothing when none is asked for) and says
// plainly why it failed (409 queue_not_empty: the queue has people waiting).
export function applyDropDay(queue) {
  const s = dropDaySettings();
  if (Object.keys(s).length === 0) return s;
  try {
    admin('PUT', `/queues/${queue}`, s);
  } catch (e) {
    throw new Error(`${e.message} — METHOD/STARTS_IN/ENDS_IN need a queue nobody waits in for a start: pick a fresh QUEUE`);
  }
  console.log(`queue ${queue}: ${JSON.stringify(s)}`);
  return s;
}
