// The `alpha dash` page: one self-contained document (no CDN, works offline). The chart is a small canvas
// line plot written here. It polls /api/records per run (?poll=MS sets the period, default 1000) and
// exposes window.alphaDash = {ready, polls, counts: {chart: {run: {series: points}}}, inspect} for tests; each
// chart's element carries data-points (points plotted over all runs and series). The inspection panels (heat
// maps, attention, logit lens) are dash_inspect_page.h's script, put in place of the marker by the server.
#pragma once

namespace alpha {

inline constexpr const char* kDashPage = R"ALPHADASH(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>alpha dash</title>
<style>
:root { --bg: #ffffff; --fg: #1d2433; --muted: #6b7385; --grid: #e3e6ec; --panel: #f6f7fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { padding: 10px 16px; border-bottom: 1px solid var(--grid); display: flex; gap: 20px; align-items: baseline; flex-wrap: wrap; }
header h1 { font-size: 16px; margin: 0; }
#legend span { margin-right: 14px; white-space: nowrap; }
#status { color: var(--muted); font-size: 12px; margin-left: auto; }
#charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 12px; padding: 12px 16px; }
.chart { background: var(--panel); border-radius: 6px; padding: 8px 10px; }
.chart h2 { font-size: 13px; margin: 0 0 4px; font-weight: 600; }
.chart h2 small { color: var(--muted); font-weight: 400; }
.chart canvas { width: 100%; height: 230px; display: block; }
#runs { padding: 0 16px 24px; }
#runs h2 { font-size: 14px; }
.run { border-top: 1px solid var(--grid); padding: 8px 0; }
.run .meta { color: var(--muted); font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
#inspect { padding: 0 16px; }
#inspect h2 { font-size: 14px; } #inspect h3 { font-size: 13px; margin: 14px 0 6px; }
#heats { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 12px; }
#heats canvas { width: 100%; height: 200px; display: block; }
#attention { display: flex; flex-wrap: wrap; gap: 10px; }
.attn { background: var(--panel); border-radius: 6px; padding: 4px 6px; }
.attn canvas { width: 128px; height: 128px; display: block; }
#lens { overflow-x: auto; }
#lens table { border-collapse: collapse; font-size: 12px; }
#lens td { padding: 2px 6px; border: 1px solid var(--grid); white-space: nowrap; }
pre { background: var(--panel); padding: 8px; overflow: auto; max-height: 320px; font-size: 12px; margin: 6px 0 0; }
</style>
</head>
<body>
<header><h1>alpha dash</h1><div id="legend"></div><div id="status">loading…</div></header>
<div id="charts"></div>
<section id="runs"><h2>runs</h2></section>
<script>/*ALPHA_INSPECT_SCRIPT*/</script>
<script>
"use strict";
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];
const CHARTS = [
  {id: "loss", title: "loss", note: "solid: train (per step), dashed: val (per eval)",
   series: [{label: "train", type: "step", key: "loss"}, {label: "val", type: "eval", key: "val_loss", dash: true}]},
  {id: "lr", title: "learning rate", series: [{label: "lr", type: "step", key: "lr"}]},
  {id: "grad_norm", title: "grad norm", note: "before clipping", series: [{label: "grad norm", type: "step", key: "grad_norm"}]},
  {id: "tokens_per_sec", title: "tokens / s", series: [{label: "tok/s", type: "step", key: "tokens_per_sec"}]},
  {id: "step_ms", title: "ms per step", note: "MPI runs: slowest rank, rank 0's all-reduce (dashed: not hidden by backward)",
   series: [{label: "step", type: "step", key: "step_ms"}, {label: "slowest rank", type: "step", key: "max_rank_step_ms"},
            {label: "all-reduce", type: "step", key: "allreduce_ms"},
            {label: "all-reduce exposed", type: "step", key: "allreduce_wait_ms", dash: true}]},
];
const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(50, Number(params.get("poll")) || 1000);
const state = {ready: false, polls: 0, counts: {}, runs: [], inspect: inspectState};
window.alphaDash = state;

// ---- formatting and the chart ------------------------------------------------------------------------
function fmt(v) {
  const a = Math.abs(v);
  if (v === 0) return "0";
  if (a >= 1e5 || a < 1e-3) return v.toExponential(1).replace("e+", "e");
  return String(Number(v.toPrecision(4)));
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
  return {lo, hi, ticks};
}

// lines: [{points: [[x, y]...], color, dash}]
function drawChart(canvas, lines) {
  const dpr = window.devicePixelRatio || 1, W = canvas.clientWidth, H = canvas.clientHeight;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const l of lines) for (const [x, y] of l.points) {
    x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
  }
  ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#6b7385";
  if (!isFinite(x0)) { ctx.fillText("waiting for data…", 12, H / 2); return; }
  const pad = (y1 - y0) * 0.05;
  const xs = niceTicks(x0, x1, 6), ys = niceTicks(y0 - pad, y1 + pad, 5);
  const L = 56, R = 10, T = 8, B = 22, pw = W - L - R, ph = H - T - B;
  const px = x => L + (x - xs.lo) / (xs.hi - xs.lo) * pw, py = y => T + (1 - (y - ys.lo) / (ys.hi - ys.lo)) * ph;
  ctx.strokeStyle = "#e3e6ec"; ctx.lineWidth = 1;
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const t of ys.ticks) {
    if (t < ys.lo || t > ys.hi) continue;
    ctx.beginPath(); ctx.moveTo(L, Math.round(py(t)) + 0.5); ctx.lineTo(L + pw, Math.round(py(t)) + 0.5); ctx.stroke();
    ctx.fillText(fmt(t), L - 6, py(t));
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const t of xs.ticks) {
    if (t < xs.lo || t > xs.hi) continue;
    ctx.beginPath(); ctx.moveTo(Math.round(px(t)) + 0.5, T); ctx.lineTo(Math.round(px(t)) + 0.5, T + ph); ctx.stroke();
    ctx.fillText(fmt(t), px(t), T + ph + 5);
  }
  ctx.strokeStyle = "#9aa1b1"; ctx.strokeRect(L + 0.5, T + 0.5, pw, ph);
  ctx.save(); ctx.beginPath(); ctx.rect(L, T, pw, ph); ctx.clip();
  for (const l of lines) {
    if (!l.points.length) continue;
    ctx.strokeStyle = l.color; ctx.fillStyle = l.color; ctx.lineWidth = 1.8;
    ctx.setLineDash(l.dash ? [6, 4] : []);
    ctx.beginPath();
    l.points.forEach(([x, y], i) => (i ? ctx.lineTo(px(x), py(y)) : ctx.moveTo(px(x), py(y))));
    ctx.stroke();
    ctx.setLineDash([]);
    if (l.points.length <= 60) for (const [x, y] of l.points) { ctx.beginPath(); ctx.arc(px(x), py(y), 2.2, 0, 7); ctx.fill(); }
  }
  ctx.restore();
}

// ---- page structure ------------------------------------------------------------------------------------
const chartEls = {};
for (const c of CHARTS) {
  const div = document.createElement("div");
  div.className = "chart"; div.dataset.chart = c.id; div.dataset.points = "0";
  div.innerHTML = `<h2>${c.title} <small>${c.note || ""}</small></h2><canvas></canvas>`;
  document.getElementById("charts").appendChild(div);
  chartEls[c.id] = div;
}

function newRun(info, i) {
  const el = document.createElement("div");
  el.className = "run";
  el.innerHTML = `<div><span class="swatch"></span><b class="name"></b> <span class="meta path"></span></div>
    <div class="meta info"></div><details><summary>config</summary><pre class="config">(no run record yet)</pre></details>`;
  el.querySelector(".swatch").style.background = COLORS[i % COLORS.length];
  el.querySelector(".name").textContent = info.name;
  el.querySelector(".path").textContent = info.path;
  document.getElementById("runs").appendChild(el);
  const legend = document.createElement("span");
  legend.innerHTML = `<span class="swatch"></span>`;
  legend.firstChild.style.background = COLORS[i % COLORS.length];
  legend.appendChild(document.createTextNode(info.name));
  document.getElementById("legend").appendChild(legend);
  const run = {id: info.id, name: info.name, color: COLORS[i % COLORS.length], el, next: 0, generation: null};
  reset(run);
  return run;
}

function reset(run) {
  run.data = {}; run.inspect = []; run.runRecord = null; run.end = null; run.last = null; run.torn = false; run.bad = 0;
  for (const c of CHARTS) run.data[c.id] = c.series.map(() => []);
}

function ingest(run, rec) {
  if (rec.type === "run" || rec.type === "resume") run.runRecord = rec;
  else if (rec.type === "end") run.end = rec;
  else if (rec.type === "step") run.last = rec;
  inspectIngest(run, rec);  // `inspect` records: the heat maps (inspect.js)
  if (typeof rec.step !== "number") return;
  for (const c of CHARTS) c.series.forEach((s, k) => {
    if (rec.type === s.type && typeof rec[s.key] === "number" && isFinite(rec[s.key])) run.data[c.id][k].push([rec.step, rec[s.key]]);
  });
}

function renderRun(run) {
  const r = run.runRecord, parts = [];
  if (r) parts.push(r.device, `${((r.parameters || 0) / 1e6).toFixed(2)}M parameters`, `alpha ${r.version}`);
  if (r && r.git_revision) parts.push(`git ${r.git_revision}`);
  parts.push(run.end ? `finished at step ${run.end.step}` : run.last ? `step ${run.last.step}` : "no steps yet");
  if (run.torn) parts.push("last line incomplete");
  if (run.bad) parts.push(`${run.bad} unreadable line(s) skipped`);
  run.el.querySelector(".info").textContent = parts.filter(Boolean).join(" · ");
  const cfg = r ? JSON.stringify(r.config, null, 2) : "(no run record yet)";
  const pre = run.el.querySelector(".config");
  if (pre.textContent !== cfg) pre.textContent = cfg;
}

function drawAll() {
  for (const c of CHARTS) {
    const lines = [];
    let total = 0;
    state.counts[c.id] = {};
    for (const run of state.runs) {
      state.counts[c.id][run.name] = {};
      c.series.forEach((s, k) => {
        const pts = run.data[c.id][k];
        state.counts[c.id][run.name][s.label] = pts.length;
        total += pts.length;
        lines.push({points: pts, color: run.color, dash: !!s.dash});
      });
    }
    chartEls[c.id].dataset.points = String(total);
    drawChart(chartEls[c.id].querySelector("canvas"), lines);
  }
  for (const run of state.runs) renderRun(run);
  drawInspect();
}

// ---- polling -------------------------------------------------------------------------------------------
async function pollRun(run) {
  let changed = false;
  for (let more = true; more;) {
    const res = await fetch(`api/records?run=${run.id}&from=${run.next}`, {cache: "no-store"});
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const j = await res.json();
    if (run.generation !== null && j.generation !== run.generation) { reset(run); run.next = 0; run.generation = j.generation; changed = true; continue; }
    run.generation = j.generation;
    for (const rec of j.records) ingest(run, rec);
    changed = changed || j.records.length > 0 || run.torn !== j.torn || run.bad !== j.bad_lines;
    run.next = j.next; run.torn = j.torn; run.bad = j.bad_lines;
    more = j.next < j.total;
  }
  return changed;
}

async function tick() {
  try {
    if (!state.runs.length) {
      const infos = await (await fetch("api/runs", {cache: "no-store"})).json();
      state.runs = infos.map(newRun);
    }
    let changed = !state.ready;
    for (const run of state.runs) changed = (await pollRun(run)) || changed;
    changed = (await pollInspect()) || changed;
    if (changed) drawAll();
    state.polls++; state.ready = true;
    document.getElementById("status").textContent = `updated ${new Date().toLocaleTimeString()} · polling every ${POLL_MS} ms`;
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach alpha dash (${e.message}); retrying`;
  }
  setTimeout(tick, POLL_MS);
}
window.addEventListener("resize", () => state.ready && drawAll());
tick();
</script>
</body>
</html>
)ALPHADASH";

}  // namespace alpha
