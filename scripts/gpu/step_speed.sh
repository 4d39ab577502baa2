#!/usr/bin/env bash
# GPU machine: `alpha train` steps on Vulkan (15, medians of steps 4-15; CONFIG, default shakespeare_char, always
# on the char corpus) for several settings, with the per-kernel GPU time of the last step (metrics.profile), then
# (TORCH=N lines) the PyTorch peer's step times in the same call. Example: the GPT-2 step with the default dispatch thresholds vs
# the old fixed ones: CONFIG=gpu/configs/gpt2_124m.json bash gpu/step_speed.sh "auto||$S" "fixed||$S --set ..."
# TOP=N lists the N costliest kernels (12); ALPHA=path another binary (an A/B of two builds); ALPHA_VK_PROFILE_SHAPES=1 in a
# spec's ENV lists each matmul per product shape. Usage (carry .gl and gpu): bash gpu/step_speed.sh "label|ENV=.. ENV2=..|--set k=v --set k2=v2" ...
set -u
source "$(dirname "$0")/setup.sh"
CONFIG=${CONFIG:-configs/shakespeare_char.json}
for spec in "$@"; do
  IFS='|' read -r label envs sets <<< "$spec"
  env $envs timeout 240 ${ALPHA:-gpu/alpha} train $CONFIG --quiet --set data.path=gpu/tinyshakespeare.txt \
    --set data.tokenizer=char --set data.val_fraction=0.1 \
    --set out_dir=$OUT/$label --set train.eval_interval=100000 --set train.eval_iters=1 --set train.sample_tokens=0 \
    --set train.log_interval=1 --set checkpoint.interval=100000 --set device=vulkan --set train.max_steps=${STEPS:-15} \
    --set metrics.profile=${PROFILE:-true} $sets > $OUT/$label.log 2>&1 || { echo "$label failed"; tail -5 $OUT/$label.log; continue; }
  python3 - $OUT/$label/metrics.jsonl $label <<'PY'
import json, sys
r=[json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
ms=sorted(x["step_ms"] for x in r[3:]); print(sys.argv[2], "steps", len(r), "median step ms", round(ms[len(ms)//2],1), "loss", r[0]["loss"], "->", r[-1]["loss"])
last=r[-2] if len(r) > 1 else r[-1]  # the last record also carries the end-of-run eval and checkpoint
g=last.get("backend", {}).get("gpu_ms", last.get("gpu_ms", {}))  # per-kernel GPU ms since the previous record
print("  gpu ms (step before last): total", round(sum(g.values()),1), " ".join(f"{k}={v:.2f}" for k,v in sorted(g.items(), key=lambda kv:-kv[1])[:int(__import__("os").environ.get("TOP", "12"))]))
print("  ", {k: v for k, v in last.items() if k not in ("loss","lr","grad_norm","step","time","elapsed_s","gpu_ms","type","backend")},
      {k: v for k, v in last.get("backend", {}).items() if k != "gpu_ms"})
PY
done
[ -n "${TORCH:-}" ] && { echo "== torch peer"; timeout 200 python3 gpu/torch_gpt.py speed 2>&1 | head -${TORCH}; }
exit 0
