// The `alpha dash` inspection panels (issue 19): a script the server puts into the page (dash_page.h, in place of
// its /*ALPHA_INSPECT_SCRIPT*/ marker) before the main script, which hands it every record (inspectIngest) and calls
// drawInspect after each change:
//   - heat maps over time, one row per layer (embed, h.0 .. h.N-1, ln_f), one column per `inspect` record of the
//     chosen run: gradient norm and update/weight ratio (the layer's parameters together), and the residual
//     stream's std after each layer (docs/metrics.md);
//   - attention maps per layer and head and the logit lens table, from RUN_DIR/inspect.json (`alpha inspect
//     RUN_DIR --prompt ...` writes it; GET /api/inspect?run=I serves it).
// Tests read window.alphaDash.inspect = {heat: {id: {rows, cols, names, last}}, attention: {layers, heads, tokens},
// lens: {rows, cols, cells}}.
#pragma once

namespace alpha {

inline constexpr const char* kDashInspectScript = R"ALPHAINSPECT("use strict";
const HEATS = [
  {id: "grad_norm", title: "gradient norm per layer", note: "log10, before clipping"},
  {id: "update_ratio", title: "update / weight per layer", note: "log10 of |Δw| / |w| per step"},
  {id: "act_scale", title: "activation scale per layer", note: "log10 std of the residual stream after the layer"},
];
const inspectState = {heat: {}, attention: {layers: 0, heads: 0, tokens: 0}, lens: {rows: 0, cols: 0, cells: []},
                      run: null, report: null, reportRun: null, fetched: 0};

function layerOf(param) {
  const m = /^transformer\.(h\.\d+)\./.exec(param);
  if (m) return m[1];
  return /ln_f/.test(param) ? "ln_f" : "embed";
}
function layerOrder(a, b) {
  const k = (n) => (n === "embed" ? -1 : n === "ln_f" ? 1e9 : Number(n.slice(2)));
  return k(a) - k(b);
}

function inspectIngest(run, rec) {
  if (rec.type !== "inspect" || typeof rec.step !== "number") return;
  const g = {}, u = {}, w = {}, act = {};
  for (const [name, p] of Object.entries(rec.params || {})) {
    const l = layerOf(name);
    if (typeof p.grad_norm === "number") g[l] = (g[l] || 0) + p.grad_norm ** 2;
    if (typeof p.weight_norm === "number" && typeof p.update_ratio === "number") {
      w[l] = (w[l] || 0) + p.weight_norm ** 2;
      u[l] = (u[l] || 0) + (p.update_ratio * p.weight_norm) ** 2;
    }
  }
  for (const [name, s] of Object.entries(rec.activations || {})) {
    const m = /^(h\.\d+)\.resid$/.exec(name);
    if ((m || name === "embed") && typeof s.std === "number") act[m ? m[1] : "embed"] = s.std;
  }
  const col = {step: rec.step, grad_norm: {}, update_ratio: {}, act_scale: act};
  for (const l of Object.keys(g)) col.grad_norm[l] = Math.sqrt(g[l]);
  for (const l of Object.keys(w)) if (w[l] > 0) col.update_ratio[l] = Math.sqrt(u[l] / w[l]);
  (run.inspect = run.inspect || []).push(col);
}

// value -> color on a blue-green-yellow ramp (t in [0, 1]).
function ramp(t) {
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const x = Math.max(0, Math.min(1, t)) * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function drawHeat(canvas, cols, key) {
  const rows = [...new Set(cols.flatMap((c) => Object.keys(c[key])))].sort(layerOrder);
  const dpr = window.devicePixelRatio || 1, W = canvas.clientWidth, H = canvas.clientHeight;
  canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
  ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#6b7385";
  if (!rows.length) {
    ctx.fillText("no inspect records (metrics.inspect_interval)", 12, H / 2);
    return {rows: 0, cols: 0, names: [], last: []};
  }
  let lo = Infinity, hi = -Infinity;
  for (const c of cols) for (const r of rows) {
    const v = c[key][r];
    if (v > 0) { lo = Math.min(lo, Math.log10(v)); hi = Math.max(hi, Math.log10(v)); }
  }
  if (!(hi > lo)) { lo -= 0.5; hi += 0.5; }
  const L = 52, R = 70, T = 6, B = 20, pw = W - L - R, ph = H - T - B, cw = pw / cols.length, rh = ph / rows.length;
  cols.forEach((c, x) => rows.forEach((r, y) => {
    const v = c[key][r];
    ctx.fillStyle = v > 0 ? ramp((Math.log10(v) - lo) / (hi - lo)) : "#e3e6ec";
    ctx.fillRect(L + x * cw, T + y * rh, Math.ceil(cw), Math.ceil(rh));
  }));
  ctx.fillStyle = "#1d2433"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
  rows.forEach((r, y) => ctx.fillText(r, L - 6, T + (y + 0.5) * rh));
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  const every = Math.max(1, Math.ceil(cols.length / 8));
  cols.forEach((c, x) => x % every === 0 && ctx.fillText(String(c.step), L + (x + 0.5) * cw, T + ph + 4));
  for (let i = 0; i <= 20; i++) { ctx.fillStyle = ramp(1 - i / 20); ctx.fillRect(W - R + 10, T + i * ph / 21, 12, ph / 21 + 1); }
  ctx.fillStyle = "#1d2433"; ctx.textAlign = "left"; ctx.textBaseline = "top";
  ctx.fillText(hi.toFixed(2), W - R + 26, T);
  ctx.textBaseline = "bottom"; ctx.fillText(lo.toFixed(2), W - R + 26, T + ph);
  return {rows: rows.length, cols: cols.length, names: rows, last: rows.map((r) => cols[cols.length - 1][key][r])};
}

function drawAttention(canvas, m) {
  const T = m.length, dpr = window.devicePixelRatio || 1, S = canvas.clientWidth;
  canvas.width = Math.round(S * dpr); canvas.height = Math.round(S * dpr);
  const ctx = canvas.getContext("2d"), c = S / T;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, S, S);
  m.forEach((row, i) => row.forEach((p, j) => {
    if (j > i) return;  // causal: the future is blank
    ctx.fillStyle = ramp(Math.sqrt(p));
    ctx.fillRect(j * c, i * c, Math.ceil(c), Math.ceil(c));
  }));
}

function inspectSection() {
  let sec = document.getElementById("inspect");
  if (sec) return sec;
  sec = document.createElement("section");
  sec.id = "inspect";
  sec.innerHTML = `<h2>inspection <select id="inspect-run"></select> <small class="meta" id="inspect-note"></small></h2>
    <div id="heats"></div><h3>attention per head <small class="meta" id="attn-note"></small></h3>
    <div id="attention"></div><h3>logit lens <small class="meta">top-1 next token (probability) from each layer's
    residual stream; hover for the top-k</small></h3><div id="lens"></div>`;
  document.getElementById("runs").before(sec);
  for (const h of HEATS) {
    const div = document.createElement("div");
    div.className = "chart"; div.dataset.heat = h.id;
    div.innerHTML = `<h2>${h.title} <small>${h.note}</small></h2><canvas></canvas>`;
    sec.querySelector("#heats").appendChild(div);
  }
  sec.querySelector("#inspect-run").addEventListener("change", (e) => { inspectState.run = Number(e.target.value); drawInspect(); });
  return sec;
}

function drawLens(report) {
  const el = document.getElementById("lens"), T = report.tokens.length;
  const table = document.createElement("table");
  const head = table.insertRow();
  head.insertCell().textContent = "layer \\ token";
  report.text.forEach((t) => (head.insertCell().textContent = JSON.stringify(t)));
  const cells = [];
  for (const l of report.logit_lens) {
    const tr = table.insertRow();
    tr.insertCell().textContent = l.layer;
    const row = [];
    for (let t = 0; t < T; t++) {
      const top = l.top[t], td = tr.insertCell();
      td.textContent = `${JSON.stringify(top[0].text)} ${top[0].p.toFixed(2)}`;
      td.title = top.map((e) => `${JSON.stringify(e.text)} ${e.p.toFixed(3)}`).join("\n");
      td.style.background = ramp(top[0].p); td.style.color = top[0].p > 0.6 ? "#1d2433" : "#ffffff";
      row.push(top[0].text);
    }
    cells.push(row);
  }
  el.replaceChildren(table);
  return {rows: report.logit_lens.length, cols: T, cells};
}

function drawInspect() {
  const sec = inspectSection(), runs = state.runs;
  const sel = sec.querySelector("#inspect-run");
  if (sel.options.length !== runs.length) sel.replaceChildren(...runs.map((r, i) => new Option(r.name, i)));
  if (inspectState.run === null || !runs[inspectState.run]) {
    const withData = runs.findIndex((r) => (r.inspect || []).length);
    inspectState.run = withData >= 0 ? withData : 0;
  }
  sel.value = String(inspectState.run);
  const run = runs[inspectState.run];
  if (!run) return;
  const cols = run.inspect || [];
  sec.querySelector("#inspect-note").textContent = `${cols.length} inspect record(s) of ${run.name}`;
  for (const h of HEATS) {
    const div = sec.querySelector(`[data-heat="${h.id}"]`);
    const got = drawHeat(div.querySelector("canvas"), cols, h.id);
    inspectState.heat[h.id] = got;
    div.dataset.rows = String(got.rows); div.dataset.cols = String(got.cols);
  }
  const rep = inspectState.reportRun === run.id ? inspectState.report : null;
  const attn = document.getElementById("attention");
  if (!rep) {
    attn.textContent = `no inspect.json beside this run's metrics: run \`alpha inspect RUN_DIR --prompt "..."\``;
    document.getElementById("lens").textContent = "";
    inspectState.attention = {layers: 0, heads: 0, tokens: 0};
    inspectState.lens = {rows: 0, cols: 0, cells: []};
    return;
  }
  document.getElementById("attn-note").textContent =
    `prompt ${JSON.stringify(rep.text.join(""))} (${rep.tokens.length} tokens; rows: query, columns: key; sqrt scale)`;
  attn.replaceChildren();
  for (const layer of rep.attention) layer.heads.forEach((m, h) => {
    const div = document.createElement("div");
    div.className = "attn"; div.dataset.layer = layer.layer; div.dataset.head = h;
    div.innerHTML = `<small>layer ${layer.layer} head ${h}</small><canvas></canvas>`;
    attn.appendChild(div);
    drawAttention(div.querySelector("canvas"), m);
  });
  inspectState.attention = {layers: rep.attention.length, heads: rep.attention.length ? rep.attention[0].heads.length : 0,
                            tokens: rep.tokens.length};
  inspectState.lens = drawLens(rep);
}

// inspect.json of the chosen run: fetched on the first poll and every 10th after (`alpha inspect` may rewrite it).
async function pollInspect() {
  const run = state.runs[inspectState.run === null ? 0 : inspectState.run];
  if (!run || (inspectState.fetched++ % 10 !== 0 && inspectState.reportRun === run.id)) return false;
  const res = await fetch(`api/inspect?run=${run.id}`, {cache: "no-store"});
  const rep = res.ok ? await res.json() : null;
  const changed = JSON.stringify(rep) !== JSON.stringify(inspectState.report) || inspectState.reportRun !== run.id;
  inspectState.report = rep; inspectState.reportRun = run.id;
  return changed;
}
)ALPHAINSPECT";

}  // namespace alpha
