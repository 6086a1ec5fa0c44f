/*
 * pow-worker.js — solves a join proof-of-work challenge in a Web Worker, so
 * the page never blocks. Find a nonce such that SHA-256(challenge + ':' +
 * nonce) starts with `difficulty` zero bits (see POST /api/queues/{q}/challenge).
 *
 * In:  {challenge, difficulty, engine?: 'js' | 'subtle', maxHashes?, progressMs?}
 * Out: {type: 'progress', hashes, ms}            about every progressMs (100)
 *      {type: 'done', nonce, hashes, ms, engine} solved
 *      {type: 'gaveup', hashes, ms, engine}      maxHashes tried, none solved
 *      {type: 'error', message}
 *
 * Two engines: 'js' (default) is the hand-written SHA-256 below, which hashes
 * the challenge's full 64-byte blocks once and then only the last block or two
 * per nonce; 'subtle' is crypto.subtle.digest in batches (secure contexts
 * only). Measured in headless Chromium the hand-written one is several times
 * faster, because every subtle digest is an asynchronous call (see the
 * proof-of-work notes in docs/API.md).
 */
'use strict';

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const H0 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const W = new Int32Array(64);

/** One SHA-256 compression of the 64 bytes at bytes[off…] into state (8 words). */
function compress(state, bytes, off) {
  for (let i = 0; i < 16; i++) {
    const j = off + i * 4;
    W[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15], y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = state[0], b = state[1], c = state[2], d = state[3];
  let e = state[4], f = state[5], g = state[6], h = state[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  state[0] = (state[0] + a) | 0; state[1] = (state[1] + b) | 0;
  state[2] = (state[2] + c) | 0; state[3] = (state[3] + d) | 0;
  state[4] = (state[4] + e) | 0; state[5] = (state[5] + f) | 0;
  state[6] = (state[6] + g) | 0; state[7] = (state[7] + h) | 0;
}

/** Whether the first hash word w starts with bits zero bits (bits ≤ 32). */
function enough(w, bits) {
  if (bits <= 0) return true;
  if (bits >= 32) return w === 0;
  return (w >>> (32 - bits)) === 0;
}

/** Bytes of a nonce: the counter in base 36 (ASCII, at most 11 characters). */
function nonceOf(n) { return n.toString(36); }

function now() { return (typeof performance !== 'undefined' ? performance : Date).now(); }

/**
 * The hand-written engine. The prefix (challenge + ':') is hashed once up to
 * its last full block (the midstate); each nonce then costs one compression.
 * To keep it one (the tail, a counter of up to 11 characters and 9 bytes of
 * padding must fit 64 bytes), a tail longer than 44 bytes is first filled to
 * the block boundary with '0's, which become the start of every nonce (at
 * most 19 + 11 characters, within the 64 allowed).
 */
async function solveJS(job, report) {
  let prefix = new TextEncoder().encode(job.challenge + ':');
  const r = prefix.length % 64;
  const fill = r > 44 ? '0'.repeat(64 - r) : '';
  if (fill) prefix = new TextEncoder().encode(job.challenge + ':' + fill);
  const full = prefix.length - (prefix.length % 64);
  const mid = new Int32Array(H0);
  for (let off = 0; off < full; off += 64) compress(mid, prefix, off);
  const tail = prefix.subarray(full);
  const buf = new Uint8Array(192);
  const state = new Int32Array(8);
  const t0 = now();
  let last = t0;
  for (let n = 0; ; n++) {
    if (job.maxHashes && n >= job.maxHashes) return { nonce: null, hashes: n, ms: now() - t0 };
    const s = nonceOf(n); // the nonce is fill + s
    const len = tail.length + s.length; // bytes in the last block(s) before padding
    buf.fill(0, 0, 128);
    buf.set(tail, 0);
    for (let i = 0; i < s.length; i++) buf[tail.length + i] = s.charCodeAt(i);
    buf[len] = 0x80;
    const blocks = len + 9 <= 64 ? 1 : 2;
    const bitLen = (prefix.length + s.length) * 8;
    const end = blocks * 64;
    buf[end - 4] = (bitLen >>> 24) & 0xff;
    buf[end - 3] = (bitLen >>> 16) & 0xff;
    buf[end - 2] = (bitLen >>> 8) & 0xff;
    buf[end - 1] = bitLen & 0xff;
    state.set(mid);
    compress(state, buf, 0);
    if (blocks === 2) compress(state, buf, 64);
    if (enough(state[0], job.difficulty)) return { nonce: fill + s, hashes: n + 1, ms: now() - t0 };
    if ((n & 0x3fff) === 0) {
      const t = now();
      if (t - last >= job.progressMs) {
        last = t;
        report(n, t - t0);
      }
    }
  }
}

/** The crypto.subtle engine: digests in batches of 512 (each is an asynchronous call). */
async function solveSubtle(job, report) {
  const subtle = self.crypto && self.crypto.subtle;
  if (!subtle) throw new Error('crypto.subtle is not available here (not a secure context)');
  const enc = new TextEncoder();
  const prefix = enc.encode(job.challenge + ':');
  const BATCH = 512;
  const t0 = now();
  let last = t0;
  for (let n = 0; ; n += BATCH) {
    const todo = [];
    for (let i = 0; i < BATCH; i++) {
      if (job.maxHashes && n + i >= job.maxHashes) break;
      const s = nonceOf(n + i);
      const msg = new Uint8Array(prefix.length + s.length);
      msg.set(prefix, 0);
      for (let k = 0; k < s.length; k++) msg[prefix.length + k] = s.charCodeAt(k);
      todo.push(subtle.digest('SHA-256', msg));
    }
    if (todo.length === 0) return { nonce: null, hashes: n, ms: now() - t0 };
    const sums = await Promise.all(todo);
    for (let i = 0; i < sums.length; i++) {
      const v = new DataView(sums[i]);
      if (enough(v.getInt32(0), job.difficulty)) return { nonce: nonceOf(n + i), hashes: n + i + 1, ms: now() - t0 };
    }
    const t = now();
    if (t - last >= job.progressMs) {
      last = t;
      report(n + sums.length, t - t0);
    }
  }
}

self.onmessage = async (e) => {
  const d = e.data || {};
  const job = {
    challenge: String(d.challenge || ''),
    difficulty: Math.max(0, Math.min(32, Number(d.difficulty) || 0)),
    maxHashes: Number(d.maxHashes) > 0 ? Number(d.maxHashes) : 0,
    progressMs: Number(d.progressMs) > 0 ? Number(d.progressMs) : 100,
  };
  const engine = d.engine === 'subtle' ? 'subtle' : 'js';
  const report = (hashes, ms) => self.postMessage({ type: 'progress', hashes, ms });
  try {
    const r = await (engine === 'subtle' ? solveSubtle(job, report) : solveJS(job, report));
    if (r.nonce === null) self.postMessage({ type: 'gaveup', hashes: r.hashes, ms: r.ms, engine });
    else self.postMessage({ type: 'done', nonce: r.nonce, hashes: r.hashes, ms: r.ms, engine });
  } catch (err) {
    self.postMessage({ type: 'error', message: String((err && err.message) || err) });
  }
};
