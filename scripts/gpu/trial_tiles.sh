#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu/prepare.sh here, carry [".gl", "gpu"]): test_vk, then the --tiles sweep of every
# tile and the trial tiles at 4096^3, GPT-2's and shakespeare_char's forward and dx shapes, GPT-2's LM head dx and a few
# weight gradients (M,K,N,ta,tb; f32 outputs too where A is transposed), with the
# driver's register and spill counts. Usage: bash gpu/trial_tiles.sh
cd "$(dirname "$0")/.."; source gpu/setup.sh > /dev/null; export OUT=${OUT:-/tmp}
VALIDATION=0 SHAPES=0 bash gpu/gpu_suite.sh test_vk
gemms=(4096,4096,4096,0,0 8192,768,2304,0,1 8192,768,3072,0,1 8192,3072,768,0,1 8192,768,768,0,1 8192,2304,768,0,0
       8192,3072,768,0,0 8192,768,3072,0,0 8192,768,50304,0,1 16384,384,1152,0,1 16384,384,1536,0,1
       16384,1536,384,0,1 16384,1152,384,0,0 16384,1536,384,0,0 16384,384,1536,0,0 8192,50304,768,0,0
       50304,8192,768,1,0 2304,8192,768,1,0 768,8192,3072,1,0)
ALPHA_VK_PIPELINE_STATS=1 ./gpu/alpha bench gpu --tiles --only gemm ${gemms[@]/#/--gemm } > $OUT/tiles.json 2> $OUT/tiles.err
echo "rc=$?"; tail -3 $OUT/tiles.err
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/tiles.json"))
for r in d["gemm"]:
    t = {k: v for k, v in r.get("tiles", {}).items() if "p0" in k}; t.update(r.get("trials", {}))
    print(r["name"], "auto %.0f (%s)" % (r["auto"]["tflops"], r["auto"]["tile"].replace("w4k64s1", "")),
          " ".join("%s=%.0f" % (k.replace("w4k64s1", ""), v["tflops"]) for k, v in t.items()))
    if "tiles_f32out" in r:
        print("   f32out: auto %.0f (%s)" % (r["auto_f32out"]["tflops"], r["auto_f32out"]["tile"].replace("w4k64s1", "")),
              " ".join("%s=%.0f" % (k.replace("w4k64s1", ""), v["tflops"]) for k, v in r["tiles_f32out"].items() if "p0" in k))
for k, v in d.get("pipeline_stats", {}).items():  # "Local Memory Size" above 2^36: spilled bytes (the driver's base)
    if any(x in k for x in ("192", "160", "128x128w4k64s1p0")): print(k, v.get("Register Count"), v.get("Local Memory Size"))
PY
