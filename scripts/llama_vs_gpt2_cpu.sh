#!/bin/bash
# Block architecture comparison on the CPU recipe (configs/shakespeare_char_cpu.json, 2000 steps, seed 1337): the
# GPT-2 block, then the Llama block (model.arch llama, default SwiGLU width) and a parameter-matched Llama
# (mlp_hidden 352: 0.81M vs GPT-2's 0.80M), same data, steps, schedule and seed. Prints each run's val loss at
# every eval (20 batches) and the noise-free full-val loss (alpha eval: every 65-token window of the val split).
# MUON=1 adds both blocks under Muon (optim.name muon, its default settings) for issue 20's optimizer curves.
# usage: scripts/llama_vs_gpt2_cpu.sh DATA.txt [OUT_DIR]  (extra runs: EXTRA="--set model.mlp_act=relu2")
set -euo pipefail
data=${1:?usage: scripts/llama_vs_gpt2_cpu.sh DATA.txt [OUT_DIR]}
out=${2:-runs/llama_vs_gpt2_cpu}
alpha=${ALPHA:-build/alpha}
run() {  # name, extra --set arguments...
  local name=$1; shift
  "$alpha" train configs/shakespeare_char_cpu.json --quiet --set data.path="$data" --set out_dir="$out/$name" "$@"
  echo "== $name val (step:loss): $(grep '"type":"eval"' "$out/$name/metrics.jsonl" |
    sed -E 's/.*"step":([0-9]+).*"val_loss":([0-9.]{6}).*/\1:\2/' | paste -sd' ')"
  echo "== $name full val: $("$alpha" eval "$out/$name")"
}
run gpt2
run llama --set model.arch=llama
run llama_f352 --set model.arch=llama --set model.mlp_hidden=352
if [ -n "${MUON:-}" ]; then
  run gpt2_muon --set optim.name=muon
  run llama_muon --set model.arch=llama --set optim.name=muon
fi
if [ -n "${EXTRA:-}" ]; then run llama_extra --set model.arch=llama $EXTRA; fi
