#!/usr/bin/env bash
# `alpha bench cpu` and its PyTorch CPU peer in one run on this machine; prints a markdown table of ratios.
# Usage: scripts/cpu_bench_compare.sh   (needs build/alpha and Debian's python3-torch)
set -euo pipefail
cd "$(dirname "$0")/.."
a=$(build/alpha bench cpu --json)
t=$(/usr/bin/python3 scripts/torch_cpu_bench.py)
python3 - "$a" "$t" <<'PY'
import json, sys
a, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"| shape (M x K x N) | Alpha GFLOP/s | PyTorch {t['torch']} GFLOP/s | Alpha / PyTorch |")
print("|---|---|---|---|")
for x, y in zip(a["matmul"], t["matmul"]):
    print(f"| {x['name']} ({x['M']}x{x['K']}x{x['N']}) | {x['gflops']:.1f} | {y['gflops']:.1f} | {x['gflops']/y['gflops']:.2f} |")
ra, rt = a["gpt_1layer_fwd_bwd_ms"], t["gpt_1layer_fwd_bwd_ms"]
print(f"| 1-layer GPT fwd+bwd, B=12 T=64 C=128 (ms, lower is better) | {ra:.2f} ms | {rt:.2f} ms | {rt/ra:.2f}x speed |")
PY
