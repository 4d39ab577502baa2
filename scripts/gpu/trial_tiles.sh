#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu/prepare.sh here, carry [".gl", "gpu"]): test_vk, then the --tiles sweep of the
# trial tiles at 4096^3 and the GPT-2 shapes with the driver's register counts. Usage: bash gpu/trial_tiles.sh
cd "$(dirname "$0")/.."; source gpu/setup.sh > /dev/null; OUT=${OUT:-/tmp}
VALIDATION=0 SHAPES=0 bash gpu/gpu_suite.sh test_vk
ALPHA_VK_PIPELINE_STATS=1 ./gpu/alpha bench gpu --tiles --only gemm --gemm 4096,4096,4096,0,0 --gemm 8192,768,2304,0,1 --gemm 8192,768,3072,0,1 --gemm 8192,3072,768,0,1 --gemm 8192,768,768,0,1 --gemm 8192,2304,768,0,0 --gemm 8192,3072,768,0,0 --gemm 8192,768,3072,0,0 --gemm 8192,768,50304,0,1 > $OUT/tiles.json 2> $OUT/tiles.err
echo "rc=$?"; tail -3 $OUT/tiles.err
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/tiles.json"))
for r in d["gemm"]:
    t = {k: v for k, v in r.get("tiles", {}).items() if "p0" in k}; t.update(r.get("trials", {}))
    print(r["name"], r["M"], r["K"], r["N"], "auto %.0f (%s)" % (r["auto"]["tflops"], r["auto"]["tile"]),
          " ".join("%s=%.0f" % (k.replace("w4k64s1",""), v["tflops"]) for k, v in t.items()))
for k, v in d.get("pipeline_stats", {}).items():
    if any(x in k for x in ("192", "160", "128x128w4k64s1p0", "96x128")) and "_f32out" not in k: print(k, json.dumps(v)[:300])
PY
