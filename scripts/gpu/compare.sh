#!/usr/bin/env bash
# Alpha beside PyTorch on this GPU, in one call (issue 16's goals): GEMM 4096^3 and GPT-2 124M's GEMM shapes, causal
# attention fwd+bwd (B8 H12 T1024 D64, 12 layers), the GPT-2 124M and shakespeare_char training steps, tokens/s and
# MFU; one JSON line per benchmark with both figures and the ratio (scripts/gpu/compare.py). Then the GEMM tile sweep
# itself (every coopmat tile at every shape). ROUNDS=N alternates the attention and step benchmarks of both sides N
# times (medians, median ratio). Usage (carry .gl and gpu, gpu/ as in README.md): [ROUNDS=N] bash gpu/compare.sh
set -u

source gpu/setup.sh
PYTHONUNBUFFERED=1 python3 gpu/compare.py  # it writes its lines to $OUT/compare.jsonl too (a tee there doubled them)
echo "== tile sweep (TFLOP/s)"
gpu/alpha bench gpu --tiles --json --config gpu/configs/gpt2_124m.json --set train.grad_accum=1 > $OUT/tiles.json
python3 - $OUT/tiles.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rows = d["gemm"]; tiles = list(rows[0]["tiles"]) + list(rows[0].get("probes", {}))
for r in rows: r["tiles"].update(r.get("probes", {}))  # timing probes (wrong results by design): the ceilings
print("shape".ljust(22) + "".join(t.rjust(16) for t in tiles) + "  auto")
for r in rows:
    print(r["name"][:21].ljust(22) + "".join(("%.1f" % r["tiles"][t]["tflops"]).rjust(16) for t in tiles)
          + "  %.1f (%s)" % (r["auto"]["tflops"], r["auto"]["tile"]))
PY
