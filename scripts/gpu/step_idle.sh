#!/usr/bin/env bash
# GPU machine: where the training step's wall time goes beside the GPU's own: `alpha bench gpu --only step` (median of
# STEPS, default 10) reports the GPU's busy ms per step and its idle ms between submissions, from a timestamp where each
# submission starts and ends, and the submissions made after the GPU had run dry. Rows: the step as the trainer runs it,
# with --step-split (a host wait after the backward), and each lazy-queue policy in POLICIES ("max_ops,max_work,ramp[,spin
# microseconds of host waits]", space-separated; default "32,1e11,4 16,1e11,4 64,1e11,4 128,1e13,4 32,1e11,32"; ramp = max_ops: no ramp). CONFIGS: gpt2 shakes (default both).
# NO_SPLIT=1 leaves out the --step-split row; ALPHA_BIN: the binary (default gpu/alpha). Usage (carry .gl and gpu): bash gpu/step_idle.sh
set -u
source "$(dirname "$0")/setup.sh"
for cfg in ${CONFIGS:-gpt2 shakes}; do
  case $cfg in
    gpt2) args=(--config gpu/configs/gpt2_124m.json --set train.grad_accum=1);;
    shakes) args=(--config gpu/configs/shakespeare_char.json --set model.precision=f16 --set model.dropout=0.0);;
    *) echo "[step_idle] unknown config $cfg (gpt2, shakes)"; exit 2;;
  esac
  rows=("trainer|"); [ -n "${NO_SPLIT:-}" ] || rows+=("split|--step-split")
  for p in ${POLICIES:-32,1e11,4 16,1e11,4 64,1e11,4 128,1e13,4 32,1e11,32}; do rows+=("policy $p|$p"); done
  for row in "${rows[@]}"; do
    name=${row%%|*}; arg=${row#*|}; extra=(); envs=()
    case $name in
      split) extra=("$arg");;
      policy*) IFS=, read -r ops work ramp spin <<< "$arg"
               envs=(ALPHA_VK_MAX_OPS="$ops" ALPHA_VK_MAX_WORK="$work" ALPHA_VK_RAMP_OPS="$ramp")
               [ -z "${spin:-}" ] || envs+=(ALPHA_VK_SPIN_US="$spin");;
    esac
    out="$OUT/idle_$(basename "${ALPHA_BIN:-alpha}")_${cfg}_${name//[ ,]/_}.json"
    env "${envs[@]}" timeout 120 "${ALPHA_BIN:-gpu/alpha}" bench gpu --only step --json --steps "${STEPS:-10}" "${args[@]}" \
      "${extra[@]}" > "$out" 2>&1
    python3 - "$out" "$cfg $name" <<'PY' || tail -3 "$out"
import json, sys
s = json.load(open(sys.argv[1]))["step"]
keys = ("step_ms", "edge_step_ms", "gpu_busy_ms", "gpu_idle_ms", "starved_submissions", "host_restart_ms", "host_restart_first_ms", "host_recycle_ms", "host_cpu_ms", "fwd_bwd_ms", "optimizer_ms")
print(f"{sys.argv[2]:24s}", " ".join(f"{k}={s[k]:.3f}" for k in keys if k in s), "idle_each=", s.get("gpu_idle_ms_each"))
PY
  done
done
exit 0
