// Builds the GPT-2 tokenizer fixture: >= 1 MB of varied text (Debian fortunes + generated Unicode, whitespace,
// number and contraction cases, all deterministic) and its token ids from the reference encoder gpt-3-encoder.
// Writes tests/fixtures/gpt2/fixture.txt (UTF-8) and fixture.tokens (uint16 little-endian ids).
// Usage: (cd tests/gpt2 && npm ci && node make_fixture.js)
'use strict';
const fs = require('fs');
const path = require('path');
const { encode, decode } = require('gpt-3-encoder');

const FORTUNES = '/usr/share/games/fortunes';
const OUT = path.join(__dirname, '..', 'fixtures', 'gpt2');

// mulberry32: a tiny seeded PRNG so the generated part is identical on every run.
let seed = 20240520;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

// 1. Up to 20 kB of whole fortunes from each fortunes-min/fortunes file, in name order.
const parts = [];
for (const name of fs.readdirSync(FORTUNES).sort()) {
  const file = path.join(FORTUNES, name);
  if (name.endsWith('.dat') || name.endsWith('.u8') || !fs.statSync(file).isFile()) continue;
  let text = fs.readFileSync(file).toString('utf8');
  if (text.length > 20000) text = text.slice(0, text.lastIndexOf('\n%\n', 20000) + 3);
  parts.push(text);
}

// 2. Generated cases.
const words = ['the', 'I', 'you', 'we', 'they', 'it', 'She', 'DON', 'can', 'won', 'y', 'rock', 'n', 'O', 'Hello',
  'naïve', 'café', 'Straße', 'Ελλάδα', 'Москва', '東京', 'मराठी', 'العربية', 'עברית', 'ไทย', '한국어', 'ｆｕｌｌ'];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'LL", "'D", "'x", "''", "'",
  '’s', '’ll', "'s'", "'ss", "'lll", "'dd", "'re'"];
const spaces = [' ', ' ', ' ', '\t', '\n', '\n', '\r\n', '\r', '\v', '\f', '\u00a0', '\u1680', '\u2000', '\u2003',
  '\u2009', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff', '\u0085', '\u180e', '\u200b'];
const numbers = () => pick([
  () => String(int(0, 9)), () => String(int(0, 1e9)), () => String(rand() * 1e6), () => `${int(1, 999)},${int(100, 999)}`,
  () => '٠١٢٣٤٥٦٧٨٩'.slice(int(0, 5), int(6, 10)), () => '०१२३४५६७८९'.slice(0, int(1, 10)), () => '０１２３４５',
  () => '²³¹¼½¾', () => 'ⅫⅣⅧ', () => '𝟘𝟙𝟚𝟛', () => '1st 2nd 3rd', () => '0x' + int(0, 1e9).toString(16),
  () => '3.14159e-10', () => '-42', () => '1'.repeat(int(10, 80))])();
const ranges = [[0x20, 0x7e], [0xa0, 0xff], [0x100, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x1e00, 0x1eff],
  [0x2000, 0x206f], [0x2100, 0x214f], [0x2190, 0x23ff], [0x2500, 0x27bf], [0x3000, 0x30ff], [0x4e00, 0x9fff],
  [0xac00, 0xd7a3], [0xfb00, 0xfdff], [0xfe00, 0xfe0f], [0xff00, 0xffef], [0x10000, 0x1007f], [0x1d400, 0x1d7ff],
  [0x1f300, 0x1faff], [0x20000, 0x2a6df], [0xe0000, 0xe007f], [0x0, 0x1f]];
const randomChar = () => {
  if (rand() < 0.1) {  // anywhere, except surrogates (not encodable as UTF-8)
    let cp;
    do cp = int(0, 0x10ffff); while (cp >= 0xd800 && cp <= 0xdfff);
    return String.fromCodePoint(cp);
  }
  const [lo, hi] = pick(ranges);
  return String.fromCodePoint(int(lo, hi));
};
const emoji = ['👍', '👩‍💻', '🇫🇷', '❤️', '1️⃣', '🏳️‍🌈', 'é', 'ñ', 'ﬁ', 'Å'];
const punct = ['.', ',', '!', '?', '...', '--', '—', '“', '”', '"', '(', ')', '[', ']', '{', '}', '<|endoftext|>',
  '#', '@', '$', '%', '&&', '||', '->', '::', '/*', '*/', '```', '\\', '\u0000', '\u0008'];
const spaceRun = () => Array.from({ length: int(1, 6) }, () => pick(spaces)).join('');
const token = () => {
  const r = rand();
  if (r < 0.25) return pick(words);
  if (r < 0.35) return pick(contractions);
  if (r < 0.5) return numbers();
  if (r < 0.6) return pick(punct);
  if (r < 0.65) return pick(emoji);
  if (r < 0.9) return Array.from({ length: int(1, 8) }, randomChar).join('');
  return spaceRun();
};
let generated = '';
while (generated.length < 280000) {
  const line = [];
  for (let k = int(1, 25); k > 0; --k) line.push(token(), rand() < 0.7 ? ' ' : rand() < 0.5 ? spaceRun() : '');
  generated += line.join('') + pick(['\n', '\n', '\n\n', ' \n', '  \n  ', '\t\n']);
}
// Long runs (the reference BPE is quadratic in piece length, so keep them moderate) and edge positions.
generated += 'a'.repeat(700) + ' ' + ' '.repeat(300) + 'x' + '\n'.repeat(50) + '9'.repeat(400) + '!'.repeat(300) +
  "don't I'm you're we've they'll he'd it's    'tis\n \n  \n";
parts.push(generated);
const text = parts.join('') + '   ';  // ends in a whitespace run

// Encode line chunks: Encoder.js concatenates its output array per piece (quadratic in text length). A cut after
// "\n" that follows a non-space and precedes a non-space is a piece boundary of the whole-text split, so the ids
// equal those of encode(text) (checked on a prefix below).
const ids = [];
let start = 0;
const isWs = (ch) => /\s/u.test(ch);
for (let i = 1; i + 1 < text.length; ++i) {
  if (text[i] === '\n' && !isWs(text[i - 1]) && !isWs(text[i + 1]) && i + 1 - start > 2000) {
    for (const id of encode(text.slice(start, i + 1))) ids.push(id);
    start = i + 1;
  }
}
for (const id of encode(text.slice(start))) ids.push(id);

const prefix = text.slice(0, 30000);
const whole = encode(prefix), chunked = [];
for (let s = 0, i = 1; i <= prefix.length; ++i) {
  if (i === prefix.length || (prefix[i] === '\n' && !isWs(prefix[i - 1]) && !isWs(prefix[i + 1] || 'x') && i - s > 500)) {
    chunked.push(...encode(prefix.slice(s, i + 1))); s = i + 1;
  }
}
if (JSON.stringify(whole) !== JSON.stringify(chunked)) throw new Error('chunked encoding differs from whole-text encoding');
if (ids.some((x) => !Number.isInteger(x) || x < 0 || x > 65535)) throw new Error('id outside uint16');
if (decode(ids) !== text) throw new Error('reference decode does not round-trip');

fs.mkdirSync(OUT, { recursive: true });
fs.writeFileSync(path.join(OUT, 'fixture.txt'), text, 'utf8');
fs.writeFileSync(path.join(OUT, 'fixture.tokens'), Buffer.from(Uint16Array.from(ids).buffer));
console.log(`fixture: ${Buffer.byteLength(text, 'utf8')} bytes, ${text.length} UTF-16 units, ${ids.length} tokens`);
