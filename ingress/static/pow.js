// The proof of work of a sale that asks for one, off the page's thread: a
// Web Worker that counts up from 0 until SHA-256(`<challenge>:<n>`) begins
// with `bits` zero bits (`seckill_core::challenge::solve` does the same).
// Told {challenge, bits}; tells {type: "progress", hashes} about every
// 100 ms, then {type: "done", solution, hashes, ms}, or {type: "error"}.
// SHA-256 is written out here: the page loads nothing from elsewhere, and
// WebCrypto's digest is asynchronous per call, far too slow for this loop.
"use strict";

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
const IV = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);
const w = new Int32Array(64);

// One 64-byte block of `bytes` from `at` into `state`.
function compress(state, bytes, at) {
  for (let i = 0; i < 16; i++) {
    const j = at + 4 * i;
    w[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = w[i - 15];
    const y = w[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
  }
  let a = state[0], b = state[1], c = state[2], d = state[3];
  let e = state[4], f = state[5], g = state[6], h = state[7];
  for (let i = 0; i < 64; i++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + s1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  state[0] = (state[0] + a) | 0; state[1] = (state[1] + b) | 0;
  state[2] = (state[2] + c) | 0; state[3] = (state[3] + d) | 0;
  state[4] = (state[4] + e) | 0; state[5] = (state[5] + f) | 0;
  state[6] = (state[6] + g) | 0; state[7] = (state[7] + h) | 0;
}

// A message's fixed beginning, its whole blocks hashed once: each attempt
// hashes only the rest and its own digits (one or two blocks).
function prefixOf(bytes) {
  const whole = bytes.length - (bytes.length % 64);
  const mid = IV.slice();
  for (let at = 0; at < whole; at += 64) compress(mid, bytes, at);
  // The rest, the longest suffix (20 digits), the 0x80 and the length fit in two blocks.
  const tail = new Uint8Array(128);
  tail.set(bytes.subarray(whole));
  return { mid, tail, rest: bytes.length - whole, length: bytes.length, state: new Int32Array(8) };
}

// SHA-256 of the prefix followed by `suffix` (the tail's bytes after the
// prefix's rest) into `p.state`.
function finish(p, suffixLength) {
  const used = p.rest + suffixLength;
  const blocks = used + 9 <= 64 ? 1 : 2;
  const end = 64 * blocks;
  p.tail[used] = 0x80;
  p.tail.fill(0, used + 1, end - 4);
  const bits = (p.length + suffixLength) * 8;
  p.tail[end - 4] = bits >>> 24;
  p.tail[end - 3] = bits >>> 16;
  p.tail[end - 2] = bits >>> 8;
  p.tail[end - 1] = bits;
  p.state.set(p.mid);
  compress(p.state, p.tail, 0);
  if (blocks === 2) compress(p.state, p.tail, 64);
  return p.state;
}

function leadingZeroBits(state) {
  let bits = 0;
  for (let i = 0; i < 8; i++) {
    if (state[i] !== 0) return bits + Math.clz32(state[i]);
    bits += 32;
  }
  return bits;
}

function hex(state) {
  return Array.from(state, (word) => (word >>> 0).toString(16).padStart(8, "0")).join("");
}

const encoder = new TextEncoder();

function sha256Hex(text) {
  return hex(finish(prefixOf(encoder.encode(text)), 0));
}

// Known answers, one per padding case (one block, the length spilling
// into a second, two whole blocks before the tail): a wrong hash would
// make the server refuse every solution.
const selfCheck = [
  ["", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
  ["abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"],
  ["abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"],
  ["abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
    "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"],
].every(([text, digest]) => sha256Hex(text) === digest);

function solve(challenge, bits) {
  const p = prefixOf(encoder.encode(`${challenge}:`));
  const started = performance.now();
  let reported = started;
  for (let n = 0; n < Number.MAX_SAFE_INTEGER; n++) {
    const digits = String(n);
    for (let i = 0; i < digits.length; i++) p.tail[p.rest + i] = digits.charCodeAt(i);
    if (leadingZeroBits(finish(p, digits.length)) >= bits) {
      postMessage({ type: "done", solution: digits, hashes: n + 1, ms: performance.now() - started });
      return;
    }
    if ((n & 0x3ff) === 0x3ff) {
      const now = performance.now();
      if (now - reported >= 100) {
        reported = now;
        postMessage({ type: "progress", hashes: n + 1 });
      }
    }
  }
  postMessage({ type: "error", message: "no solution below 2^53" });
}

onmessage = (event) => {
  if (!selfCheck) {
    postMessage({ type: "error", message: "this browser computes SHA-256 wrongly here" });
    return;
  }
  const { challenge, bits } = event.data;
  solve(String(challenge), Number(bits));
};
