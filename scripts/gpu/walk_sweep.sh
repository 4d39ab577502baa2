#!/usr/bin/env bash
# GPU machine: the GEMM workgroup walk's band height (spirv/matmul_cm.comp GROUP_M; main uses 8) swept over WALKS
# (default "4 6 8 10 12 16") on the walk twins of the per-shape tiles (`alpha bench gpu --tiles --walks`), at 4096^3
# and GPT-2 124M's forward and dx shapes (f16 out); first test_vk's block-tile case checks every twin bitwise against
# its own tile. Prints per shape the per-shape tile and each twin's TFLOP/s per height (4096^3 twice: first and last),
# and the driver's register counts. Usage (carry .gl and gpu): bash gpu/walk_sweep.sh
set -u
cd "$(dirname "$0")/.."
source gpu/setup.sh > /dev/null
out=${OUT:-/tmp}
timeout 240 gpu/test_vk -tc='*coopmat block tiles*' > "$out/test_walk.log" 2>&1
echo "test_vk block tiles (walk twins): exit $? $(grep -a '^\[doctest\] assertions' "$out/test_walk.log" | tail -1)"
walks=$(echo "${WALKS:-4 6 8 10 12 16}" | tr ' ' ',')
# Two runs of ~2 min each (PARTS picks), so a timeout costs one half: 4096^3 and the forward products, then dx.
fwd=(4096,4096,4096,0,0 8192,768,2304,0,1 8192,768,768,0,1 8192,768,3072,0,1 8192,3072,768,0,1 8192,768,50304,0,1
     4096,4096,4096,0,0)
dx=(8192,2304,768,0,0 8192,768,768,0,0 8192,3072,768,0,0 8192,768,3072,0,0 8192,50304,768,0,0)
for part in ${PARTS:-fwd dx}; do
  declare -n shapes=$part
  ALPHA_VK_PIPELINE_STATS=1 timeout 280 gpu/alpha bench gpu --tiles --walks "$walks" --only gemm --json ${shapes[@]/#/--gemm } \
    > "$out/walks_$part.json" 2> "$out/walks_$part.err" || { echo "$part: bench failed"; tail -3 "$out/walks_$part.err"; continue; }
  python3 - "$out/walks_$part.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["gemm"]:
    print(f"{r['M']}x{r['K']}x{r['N']} ta{int(r['ta'])} tb{int(r['tb'])}: auto {r['auto']['tflops']:.1f} ({r['auto']['tile']})")
    for twin, bands in r.get("walks", {}).items():
        print("   ", twin, " ".join(f"{b}:{v['tflops']:.1f}" for b, v in bands.items()))
for k, v in json.load(open(sys.argv[1])).get("pipeline_stats", {}).items():
    if "p0" in k and "128x128" in k or "192x128" in k: print(k, "registers", v.get("Register Count"))
PY
done
