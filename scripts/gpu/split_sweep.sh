#!/usr/bin/env bash
# GPU machine: the split-K target of the coopmat GEMMs with f32 outputs (ALPHA_VK_SPLIT_TARGET, in workgroups; f16
# outputs keep 768) swept over TARGETS (default
# "512 768 1024 1188 1584"): GPT-2 124M's weight-gradient products (f32 out, the per-shape tile and its split count)
# from `alpha bench gpu --tiles --gemm`, then the training steps through ab_step.sh, one wrapper of gpu/alpha per
# target (CONFIGS, ROUNDS as there). Usage (carry .gl and gpu): bash gpu/split_sweep.sh
set -u
cd "$(dirname "$0")/.."
source gpu/setup.sh > /dev/null
out=${OUT:-/tmp}
wrappers=()
for t in ${TARGETS:-512 768 1024 1188 1584}; do
  w=/tmp/alpha_split_$t
  printf '#!/bin/sh\nALPHA_VK_SPLIT_TARGET=%s exec %s "$@"\n' "$t" "$PWD/gpu/alpha" > "$w" && chmod +x "$w"
  wrappers+=("$w")
  # dW = dy^T x of proj, fc, qkv and attn proj (M x K x N, A transposed), as in a step with grad_accum 1
  "$w" bench gpu --tiles --json --gemm 768,8192,3072,1,0 --gemm 3072,8192,768,1,0 --gemm 2304,8192,768,1,0 \
    --gemm 768,8192,768,1,0 > "$out/split_$t.json" 2> "$out/split_$t.err" || { echo "target $t: bench failed"; tail -3 "$out/split_$t.err"; continue; }
  python3 - "$out/split_$t.json" "$t" <<'PY'
import json, sys
def rows(o):
    if isinstance(o, dict):
        if 'tiles' in o and 'name' in o: yield o
        for v in o.values(): yield from rows(v)
    elif isinstance(o, list):
        for v in o: yield from rows(v)
for r in rows(json.load(open(sys.argv[1]))):
    a = r['auto_f32out']
    print(f"target {sys.argv[2]} {r['M']}x{r['K']}x{r['N']} f32 out {a['tflops']:.1f} TFLOP/s ({a['tile']})")
PY
done
OUT=$out bash gpu/ab_step.sh "${wrappers[@]}"
