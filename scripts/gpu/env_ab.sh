#!/usr/bin/env bash
# GPU machine: gpu/alpha as built against the same binary under environment settings (VARIANTS, space-separated
# variants, each VAR=value[,VAR=value...]; e.g. "ALPHA_VK_CM_TILE=192x128w4k64s1p0"): the training steps through ab_step.sh
# (CONFIGS, default gpt2; ROUNDS), then the deferred weight gradients' phase alone (`alpha bench gpu --only overlap`,
# its "dW" rows: wall ms of products side by side, as the step runs them after its backward walk).
# Usage (carry .gl and gpu): VARIANTS="..." bash gpu/env_ab.sh
set -u
cd "$(dirname "$0")/.."
source gpu/setup.sh > /dev/null
out=${OUT:-/tmp}
bins=("$PWD/gpu/alpha")
for v in ${VARIANTS:?VARIANTS=\"VAR=value ...\"}; do
  w=/tmp/alpha_env_${v//[^A-Za-z0-9_]/_}
  printf '#!/bin/sh\nexport %s\nexec %s "$@"\n' "${v//,/ }" "$PWD/gpu/alpha" > "$w" && chmod +x "$w"
  bins+=("$w")
done
CONFIGS=${CONFIGS:-gpt2} OUT=$out bash gpu/ab_step.sh "${bins[@]}"
[ "${OVERLAP:-1}" = 1 ] || exit 0
for bin in "${bins[@]}"; do
  f="$out/overlap_$(basename "$bin").json"
  timeout 200 "$bin" bench gpu --only overlap --json --config gpu/configs/gpt2_124m.json --set train.grad_accum=1 \
    > "$f" 2> "$f.err" || { echo "$(basename "$bin"): overlap bench failed"; tail -3 "$f.err"; continue; }
  python3 - "$f" "$(basename "$bin")" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["overlap"]:
    if r["name"].startswith("dW"):
        t = r["dw_gflop"] / r["wall_ms"] if r["wall_ms"] > 0 else 0
        print(f"{sys.argv[2]}: {r['name']}: {r['wall_ms']:.3f} ms ({t:.0f} TFLOP/s)")
PY
done
