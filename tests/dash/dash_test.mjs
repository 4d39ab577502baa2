// End-to-end test of `alpha dash` in headless Chromium (Debian's chromium driven by playwright-core):
// the page loads, every chart shows the fixture runs' points, lines appended to a metrics file appear without
// a reload (a half-written line only once it is complete), and screenshots of the charts are not blank; the
// inspection panels (issue 19) show run-a's `inspect` records as per-layer heat maps and its inspect.json (written
// by `alpha inspect`) as attention maps per head and a logit lens table.
// usage: node dash_test.mjs PATH/TO/alpha          (CTest: test dash_chromium; ./dev setup runs npm ci here)
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const alphaBin = path.resolve(process.argv[2] || "");
const chromiumBin = process.env.ALPHA_CHROMIUM || "/usr/bin/chromium";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "alpha-dash-test-"));
let dash = null, context = null;

async function cleanup() {
  if (context) await context.close().catch(() => {});
  if (dash && dash.exitCode === null) dash.kill("SIGTERM");
  fs.rmSync(tmp, { recursive: true, force: true });
}
async function fail(msg) {
  console.error(`FAIL: ${msg}`);
  await cleanup();
  process.exit(1);
}
function check(cond, msg) {
  if (!cond) throw new Error(msg);
}
const watchdog = setTimeout(() => fail("timed out after 90 s"), 90_000);

// Complete lines only, as the dashboard must read them: a last line without "\n" is not a record yet.
function records(text) {
  const lines = text.split("\n");
  lines.pop();
  return lines.filter((l) => l.trim()).map((l) => JSON.parse(l));
}
// Expected points per chart and series, mirroring CHARTS in train/metrics/dash_page.h.
const SERIES = {
  loss: { train: ["step", "loss"], val: ["eval", "val_loss"] },
  lr: { lr: ["step", "lr"] },
  grad_norm: { "grad norm": ["step", "grad_norm"] },
  tokens_per_sec: { "tok/s": ["step", "tokens_per_sec"] },
  step_ms: { step: ["step", "step_ms"] },  // its MPI series are empty in these single-process runs
};
function expectedCounts(recs) {
  const out = {};
  for (const [chart, series] of Object.entries(SERIES)) {
    out[chart] = {};
    for (const [label, [type, key]] of Object.entries(series))
      out[chart][label] = recs.filter((r) => r.type === type && typeof r.step === "number" && typeof r[key] === "number").length;
  }
  return out;
}

function decodePng(buf) {
  let pos = 8, width = 0, height = 0, depth = 0, ctype = 0, interlace = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos), type = buf.toString("ascii", pos + 4, pos + 8), data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === "IHDR") [width, height, depth, ctype, interlace] = [data.readUInt32BE(0), data.readUInt32BE(4), data[8], data[9], data[12]];
    else if (type === "IDAT") idat.push(data);
    else if (type === "IEND") break;
    pos += 12 + len;
  }
  check(depth === 8 && (ctype === 2 || ctype === 6) && interlace === 0, `unexpected PNG format depth ${depth} type ${ctype}`);
  const bpp = ctype === 6 ? 4 : 3, stride = width * bpp, raw = zlib.inflateSync(Buffer.concat(idat)), px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? px[y * stride + x - bpp] : 0, b = y > 0 ? px[(y - 1) * stride + x] : 0;
      const c = x >= bpp && y > 0 ? px[(y - 1) * stride + x - bpp] : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const pred = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][f];
      px[y * stride + x] = (raw[y * (stride + 1) + 1 + x] + pred) & 255;
    }
  }
  return { width, height, bpp, px };
}
// Luminance variance and the fraction of saturated (plotted-line) pixels of a screenshot.
function pixelStats(png) {
  const { width, height, bpp, px } = decodePng(png);
  let sum = 0, sum2 = 0, colored = 0;
  const n = width * height;
  for (let i = 0; i < n; i++) {
    const [r, g, b] = [px[i * bpp], px[i * bpp + 1], px[i * bpp + 2]];
    const l = 0.299 * r + 0.587 * g + 0.114 * b;
    sum += l;
    sum2 += l * l;
    if (Math.max(r, g, b) - Math.min(r, g, b) > 60) colored++;
  }
  return { variance: sum2 / n - (sum / n) ** 2, colored: colored / n };
}

// The inspection panels: heat maps (one row per layer, one column per inspect record, the layer's values),
// attention maps (layers x heads canvases) and the logit lens (top-1 tokens of inspect.json), all non-blank.
async function checkInspectPanels(page, recs) {
  const rep = JSON.parse(fs.readFileSync(path.join(here, "fixture", "run-a", "inspect.json"), "utf8"));
  const insp = recs.filter((r) => r.type === "inspect");
  check(insp.length === 3, `fixture run-a should hold 3 inspect records, has ${insp.length}`);
  await page.waitForFunction(() => window.alphaDash.inspect.attention.layers > 0, null, { timeout: 10_000 });
  const got = await page.evaluate(() => window.alphaDash.inspect);
  const L = rep.model.n_layer, H = rep.model.n_head;
  const layers = ["embed", ...Array.from({ length: L }, (_, i) => `h.${i}`), "ln_f"];
  for (const id of ["grad_norm", "update_ratio", "act_scale"]) {
    const want = id === "act_scale" ? layers.slice(0, -1) : layers;
    check(got.heat[id].cols === insp.length && JSON.stringify(got.heat[id].names) === JSON.stringify(want),
          `heat map ${id}: ${got.heat[id].cols} columns of rows ${got.heat[id].names}, want ${insp.length} of ${want}`);
  }
  // The last column, from the last record: a layer's gradient norm is the norm over its parameters.
  const last = insp.at(-1), sq = (l) => Object.entries(last.params).filter(([n]) => layers[0] === l
    ? /wte|wpe/.test(n) : n.startsWith(`transformer.${l}.`)).reduce((s, [, p]) => s + p.grad_norm ** 2, 0);
  for (const [i, l] of layers.slice(0, -1).entries())
    check(Math.abs(got.heat.grad_norm.last[i] - Math.sqrt(sq(l))) < 1e-9 * Math.sqrt(sq(l)), `grad norm of ${l}`);
  check(Math.abs(got.heat.act_scale.last[1] - last.activations["h.0.resid"].std) < 1e-12, "act scale of h.0");
  check(got.attention.layers === L && got.attention.heads === H && got.attention.tokens === rep.tokens.length,
        `attention panel ${JSON.stringify(got.attention)}`);
  check((await page.$$("#attention .attn canvas")).length === L * H, "one attention canvas per layer and head");
  const wantCells = rep.logit_lens.map((l) => l.top.map((t) => t[0].text));
  check(got.lens.rows === rep.logit_lens.length && got.lens.cols === rep.tokens.length &&
        JSON.stringify(got.lens.cells) === JSON.stringify(wantCells), "logit lens cells differ from inspect.json");
  check((await page.$$("#lens tr")).length === rep.logit_lens.length + 1, "logit lens table rows");
  for (const id of ["grad_norm", "update_ratio", "act_scale"]) {
    const st = pixelStats(await page.locator(`[data-heat="${id}"] canvas`).screenshot());
    check(st.variance > 20 && st.colored > 0.05, `heat map ${id} looks blank: ${JSON.stringify(st)}`);
  }
  const st = pixelStats(await page.locator(`#attention .attn canvas`).first().screenshot());
  check(st.variance > 20 && st.colored > 0.05, `attention map looks blank: ${JSON.stringify(st)}`);
  console.log("inspection panels show the fixture's heat maps, attention maps and logit lens");
}

async function main() {
  check(fs.existsSync(alphaBin), `alpha binary not found at "${alphaBin}" (usage: node dash_test.mjs PATH/TO/alpha)`);
  check(fs.existsSync(chromiumBin), `${chromiumBin} not found (apt install chromium; ./dev setup does)`);
  const runs = {};
  for (const name of ["run-a", "run-b"]) {
    fs.mkdirSync(path.join(tmp, name));
    const file = path.join(tmp, name, "metrics.jsonl");
    fs.copyFileSync(path.join(here, "fixture", name, "metrics.jsonl"), file);
    runs[name] = { file, recs: records(fs.readFileSync(file, "utf8")) };
  }
  check(!fs.readFileSync(runs["run-b"].file, "utf8").endsWith("\n"), "fixture run-b should end in a torn line");
  fs.copyFileSync(path.join(here, "fixture", "run-a", "inspect.json"), path.join(tmp, "run-a", "inspect.json"));

  dash = spawn(alphaBin, ["dash", path.join(tmp, "run-a"), path.join(tmp, "run-b"), "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  dash.stderr.on("data", (d) => (stderr += d));
  const url = await new Promise((resolve, reject) => {
    let out = "";
    dash.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) resolve(m[0]);
    });
    dash.on("exit", (code) => reject(new Error(`alpha dash exited with ${code}: ${stderr}`)));
    setTimeout(() => reject(new Error(`alpha dash printed no URL in 10 s: ${out} ${stderr}`)), 10_000);
  });
  console.log(`alpha dash at ${url}`);

  context = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
    executablePath: chromiumBin,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  const page = context.pages()[0] || (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && pageErrors.push(`${m.text()} (${m.location().url})`));
  // Self-contained: any request leaving the dashboard's origin is a failure (no CDN).
  const foreign = [];
  page.on("request", (r) => !r.url().startsWith(url) && foreign.push(r.url()));

  await page.goto(`${url}?poll=200`);
  await page.waitForFunction(() => window.alphaDash && window.alphaDash.ready, null, { timeout: 15_000 });
  const counts = await page.evaluate(() => window.alphaDash.counts);
  for (const [name, run] of Object.entries(runs)) {
    const want = expectedCounts(run.recs);
    for (const chart of Object.keys(SERIES))
      for (const label of Object.keys(SERIES[chart])) {
        const got = counts[chart]?.[name]?.[label];
        check(got === want[chart][label] && got > 0, `${name} ${chart}/${label}: page plots ${got} points, fixture has ${want[chart][label]}`);
      }
  }
  const lossPoints = Number(await page.getAttribute('[data-chart="loss"]', "data-points"));
  const wantLoss = Object.values(runs).reduce((s, r) => s + expectedCounts(r.recs).loss.train + expectedCounts(r.recs).loss.val, 0);
  check(lossPoints === wantLoss, `loss chart data-points ${lossPoints}, want ${wantLoss}`);
  // The run's config is shown, exactly as in its run record.
  const configs = await page.$$eval("#runs .config", (els) => els.map((e) => e.textContent));
  const canon = (v) => (v && typeof v === "object" ? `{${Object.keys(v).sort().map((k) => `${k}:${canon(v[k])}`).join(",")}}` : JSON.stringify(v));
  check(canon(JSON.parse(configs[0])) === canon(runs["run-a"].recs[0].config), "run-a's config is not shown");
  const runsText = await page.textContent("#runs");
  check(runsText.includes("last line incomplete"), "run-b's torn last line is not flagged");
  console.log("initial points match the fixture");
  await checkInspectPanels(page, runs["run-a"].recs);

  // Live update: append to run-a, first half a line (not plotted yet), then the rest and more records.
  await page.evaluate(() => (window.__noReload = 42));
  const last = runs["run-a"].recs.filter((r) => r.type === "step").at(-1);
  const more = [];
  for (let s = last.step + 1; s <= last.step + 5; s++)
    more.push({ ...last, step: s, time: last.time + s, loss: last.loss * 0.99 ** (s - last.step), tokens_seen: last.tokens_seen + s });
  more.push({ type: "eval", time: last.time + 10, step: last.step + 5, train_loss: last.loss * 0.95, val_loss: last.loss, elapsed_s: 9 });
  const text = more.map((r) => JSON.stringify(r) + "\n").join("");
  const cut = Math.floor(JSON.stringify(more[0]).length / 2);
  fs.appendFileSync(runs["run-a"].file, text.slice(0, cut));
  const polls0 = await page.evaluate(() => window.alphaDash.polls);
  await page.waitForFunction((p) => window.alphaDash.polls >= p + 3, polls0, { timeout: 10_000 });
  const mid = await page.evaluate(() => window.alphaDash.counts.loss["run-a"].train);
  check(mid === expectedCounts(runs["run-a"].recs).loss.train, `a half-written line was plotted (${mid} points)`);
  fs.appendFileSync(runs["run-a"].file, text.slice(cut));
  const want = expectedCounts(records(fs.readFileSync(runs["run-a"].file, "utf8")));
  await page.waitForFunction(
    (w) => window.alphaDash.counts.loss["run-a"].train === w.loss.train && window.alphaDash.counts.loss["run-a"].val === w.loss.val &&
      window.alphaDash.counts.lr["run-a"].lr === w.lr.lr,
    want, { timeout: 10_000 });
  check((await page.evaluate(() => window.__noReload)) === 42, "the page reloaded");
  console.log("appended lines appeared without reload");

  // Screenshots: each chart's canvas has plotted (colored) pixels and is not flat.
  const shots = path.join(process.env.ALPHA_DASH_SHOTS || tmp);
  fs.mkdirSync(shots, { recursive: true });
  await page.locator("#charts").screenshot({ path: path.join(shots, "dash.png") });
  for (const chart of Object.keys(SERIES)) {
    const png = await page.locator(`[data-chart="${chart}"] canvas`).screenshot();
    const st = pixelStats(png);
    check(st.variance > 20 && st.colored > 0.002, `chart ${chart} looks blank: variance ${st.variance.toFixed(1)}, colored ${st.colored}`);
  }
  check(pageErrors.length === 0, `page errors: ${pageErrors.join("; ")}`);
  check(foreign.length === 0, `requests outside the dashboard: ${foreign.join(", ")}`);
  console.log("charts are non-blank; PASS");
}

main()
  .then(async () => {
    clearTimeout(watchdog);
    await cleanup();
    process.exit(0);
  })
  .catch((e) => fail(e.stack || String(e)));
