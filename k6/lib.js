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
