#!/usr/bin/env bash
# GPU machine: gpu/alpha as built against the same binary under environment settings (VARIANTS, space-separated
# variants, each VAR=value[,VAR=value...]; e.g. "ALPHA_VK_CM_TILE=192x128w4k64s1p0"): the training steps through ab_step.sh
# (CONFIGS, default gpt2; ROUNDS), then the deferred weight gradients' phase alone (`alpha bench gpu --only overlap`,
# its "dW" rows: wall ms of products side by side, as the step runs them after its backward walk), and last a
# summary: per config and variant the rounds' step and GPU-busy ms, and the whole dW phase's ms. The per-run JSON
# files go to AB_DIR (default /tmp/env_ab, not $OUT: the device tool brings back 8 files at most).
# Usage (carry .gl and gpu): VARIANTS="..." bash gpu/env_ab.sh
set -u
cd "$(dirname "$0")/.."
source gpu/setup.sh > /dev/null
out=${AB_DIR:-/tmp/env_ab}
mkdir -p "$out" && rm -f "$out"/ab_*.json "$out"/overlap_*
bins=("$PWD/gpu/alpha")
for v in ${VARIANTS:?VARIANTS=\"VAR=value ...\"}; do
  w=/tmp/alpha_env_${v//[^A-Za-z0-9_]/_}
  printf '#!/bin/sh\nexport %s\nexec %s "$@"\n' "${v//,/ }" "$PWD/gpu/alpha" > "$w" && chmod +x "$w"
  bins+=("$w")
done
CONFIGS=${CONFIGS:-gpt2} OUT=$out bash gpu/ab_step.sh "${bins[@]}"
for bin in "${bins[@]}"; do
  [ "${OVERLAP:-1}" = 1 ] || break
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
echo "== summary (step ms / GPU busy ms per round; dW phase: 'dW step: layers, then head')"
python3 - "$out" "${bins[@]}" <<'PY'
import glob, json, os, sys
out, names = sys.argv[1], [os.path.basename(b) for b in sys.argv[2:]]
for name in names:
    cells = []
    for cfg in os.environ.get("CONFIGS", "gpt2").split():
        rounds = []
        for f in sorted(glob.glob(f"{out}/ab_*_{cfg}_{name}.json")):
            try:
                s = json.load(open(f))["step"]
                s = s[0] if isinstance(s, list) else s
                rounds.append(f"{s['step_ms']:.2f}/{s['gpu_busy_ms']:.2f}")
            except (ValueError, KeyError, OSError):
                rounds.append("failed")
        cells.append(f"{cfg} {' '.join(rounds)}")
    try:
        rows = json.load(open(f"{out}/overlap_{name}.json"))["overlap"]
        cells += [f"dW {r['wall_ms']:.3f} ms" for r in rows if r["name"] == "dW step: layers, then head"]
    except (ValueError, KeyError, OSError):
        pass
    print(f"{name}: " + "; ".join(cells))
PY
