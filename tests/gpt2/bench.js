// Reference GPT-2 encoding throughput (gpt-3-encoder) on one file. Encoder.js concatenates its output per piece,
// which is quadratic in input length, so the text goes in as ~4 kB line chunks cut at piece boundaries (as a
// caller would feed documents); its BPE cache persists across calls, so pass 1 is cold and pass 2 warm.
// Usage: node tests/gpt2/bench.js FILE [MAX_BYTES]
'use strict';
const fs = require('fs');
const { encode } = require('gpt-3-encoder');
let buf = fs.readFileSync(process.argv[2]);
if (process.argv[3]) buf = buf.subarray(0, Number(process.argv[3]));
const text = buf.toString('utf8');
const isWs = (ch) => /\s/u.test(ch);
const chunks = [];
let start = 0;
for (let i = 1; i + 1 < text.length; ++i) {
  if (text[i] === '\n' && !isWs(text[i - 1]) && !isWs(text[i + 1]) && i + 1 - start > 4000) {
    chunks.push(text.slice(start, i + 1));
    start = i + 1;
  }
}
chunks.push(text.slice(start));
const mb = buf.length / 1e6;
for (const pass of ['cold', 'warm']) {
  const t0 = process.hrtime.bigint();
  let n = 0;
  for (const c of chunks) n += encode(c).length;
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`js gpt2 ${pass} encode_MBps=${(mb / s).toFixed(2)} tokens=${n} bytes=${buf.length}`);
}
