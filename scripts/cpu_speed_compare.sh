#!/usr/bin/env bash
# Alpha's CPU path vs PyTorch on the same CPU, same thread count, one trainer at a time (issue 18). Prints JSON
# lines: the machine; the CPU recipe's median step ms (configs/shakespeare_char_cpu.json vs
# scripts/torch_cpu_recipe.py) with the Highway kernels and with the plain loops (ALPHA_CPU_SIMD=0); GPT-2 small
# forward+backward at B4 T256 and the 1-layer block (`alpha bench cpu --gpt2` vs scripts/torch_cpu_bench.py
# GPT2=1); `alpha bench cpu --kernels` (per-kernel GB/s, GFLOP/s against this CPU's measured peaks).
# Usage: [STEPS=300] [PY=python3] [SKIP_BENCH=1] [SKIP_KERNELS=1] [SKIP_PLAIN=1] [PROFILE=1] [VARIANTS=...] [ROUNDS=N]
#        scripts/cpu_speed_compare.sh DIR [threads...]   (default threads: 16 1; GPT-2, kernels, variants use the first)
#   VARIANTS="ENV=.. ENV=..|..": per environment, `alpha bench cpu --gpt2` (GEMMs, block, GPT-2) and a recipe run.
#   PROFILE=1: one GPT-2 step per op for both (`alpha bench cpu --profile`, torch.profiler), as JSON lines.
#   ROUNDS=N: the recipe and GPT-2 comparisons N times, Alpha and PyTorch alternating, then the median of the
#   rounds' ratios (what=median_ratio): a shared machine's load drifts by 10-20% between one trainer's run and the next.
#   DIR holds alpha, tinyshakespeare.txt, shakespeare_char_cpu.json, torch_cpu_recipe.py, torch_cpu_bench.py and
#   lib/ (shared libraries the binary needs where they are not installed; libopenblas.so.0.xz is unpacked).
# On the dev VM: mkdir d; cp build/alpha configs/shakespeare_char_cpu.json scripts/torch_*.py DATA d/ and run.
set -u
dir=${1:?usage: scripts/cpu_speed_compare.sh DIR [threads...]}
shift
threads=("${@:-16}")
[ $# -gt 0 ] || threads=(16 1)
steps=${STEPS:-300}
[ ! -f "$dir/lib/libopenblas.so.0.xz" ] || [ -f "$dir/lib/libopenblas.so.0" ] || xz -dk "$dir/lib/libopenblas.so.0.xz"
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=$(mktemp -d)
py=${PY:-python3}  # needs torch

"$py" - <<PY
import json, os, torch
cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
flags = open("/proc/cpuinfo").read()
print(json.dumps(dict(machine=cpu[0] if cpu else "?", logical_cpus=len(cpu), affinity=len(os.sched_getaffinity(0)),
                      avx512="avx512f" in flags, avx2="avx2" in flags, torch=torch.__version__,
                      env={k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS", "ALPHA"))})))
PY

# Median step ms of an Alpha CPU-recipe run (steps 10+).
alpha_recipe() {  # threads simd [env...]
  local o=$work/a$1$2$RANDOM th=$1 simd=$2
  shift 2
  env "$@" ALPHA_NUM_THREADS=$th ALPHA_CPU_SIMD=$simd timeout 300 "$dir/alpha" train "$dir/shakespeare_char_cpu.json" --quiet \
    --set data.path="$dir/tinyshakespeare.txt" --set out_dir="$o" --set train.max_steps="$steps" \
    --set train.eval_interval=100000 --set train.log_interval=1 --set train.sample_tokens=0 \
    --set checkpoint.interval=100000 >"$o.log" 2>&1 ||
    { echo "{\"error\": \"alpha recipe threads $th simd $simd\", \"log\": \"$(tail -c 300 "$o.log" | tr '\n"' ' ')\"}" >&2; return; }
  "$py" -c "
import json; r=[json.loads(l) for l in open('$o/metrics.jsonl') if '\"type\":\"step\"' in l]
ms=sorted(x['step_ms'] for x in r[10:]); print(round(ms[len(ms)//2], 2), repr(r[-1]['loss']))"
}

# VARIANTS: `alpha bench cpu --gpt2` and a recipe run under each environment first.
IFS='|' read -r -a variants <<<"${VARIANTS:-}"
for v in "${variants[@]}"; do
  read -r vstep _ <<<"$(alpha_recipe "${threads[0]}" 1 $v)"
  env $v ALPHA_NUM_THREADS="${threads[0]}" timeout 200 "$dir/alpha" bench cpu --gpt2 --json 2>&1 | "$py" -c "
import json, sys
try:
    a = json.loads(sys.stdin.read())
except Exception as e:
    sys.exit(print(json.dumps(dict(variant='$v', error=str(e)))))
print(json.dumps(dict(what='variant', variant='$v', blas=a.get('blas'), recipe_step_ms='$vstep',
                      gpt2_ms=round(a['gpt2_fwd_bwd_ms'], 1), block_ms=round(a['gpt_1layer_fwd_bwd_ms'], 2),
                      gflops={m['name']: round(m['gflops']) for m in a['matmul']})))"
done

rounds=${ROUNDS:-1}
ratios=$work/ratios
for th in "${threads[@]}"; do
 for ((round = 1; round <= rounds; round++)); do
  read -r a aloss <<<"$(alpha_recipe "$th" 1)"
  p=skipped ploss=
  [ -n "${SKIP_PLAIN:-}" ] || read -r p ploss <<<"$(alpha_recipe "$th" 0)"
  t=$(EVAL_INTERVAL=100000 THREADS=$th timeout 300 "$py" "$dir/torch_cpu_recipe.py" "$dir/tinyshakespeare.txt" "$steps" |
      tail -1 | "$py" -c "import json,sys; print(json.loads(sys.stdin.read())['median_step_ms'])")
  "$py" -c "
import json; a, p, t = '$a', '$p', '$t'
f = lambda s: float(s) if s.replace('.', '', 1).isdigit() else None
r = dict(what='cpu_recipe_step_ms', threads=$th, steps=$steps, alpha=f(a), alpha_plain_loops=f(p), torch=f(t),
         alpha_last_loss='${aloss:-}', plain_loops_last_loss='${ploss:-}')
if r['alpha'] and r['torch']: r['alpha_over_torch'] = round(r['alpha'] / r['torch'], 3)
if r['alpha'] and r['alpha_plain_loops']: r['simd_speedup'] = round(r['alpha_plain_loops'] / r['alpha'], 3)
r['round'] = $round
print(json.dumps(r))
if 'alpha_over_torch' in r: print('cpu_recipe_step_ms', $th, r['alpha_over_torch'], file=open('$ratios', 'a'))"
 done
done

# ROUNDS > 1: the median of the rounds' Alpha / PyTorch ratios per comparison.
medians() {
  [ "$rounds" -le 1 ] || [ ! -f "$ratios" ] || "$py" - "$ratios" <<'PY'
import collections, json, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    what, th, r = line.split()
    by[(what, int(th))].append(float(r))
for (what, th), rs in by.items():
    print(json.dumps(dict(what="median_ratio", of=what, threads=th, rounds=rs, alpha_over_torch=round(statistics.median(rs), 3))))
PY
}
[ -z "${SKIP_BENCH:-}" ] || { medians; rm -rf "$work"; exit 0; }  # recipe only
th=${threads[0]}
for ((round = 1; round <= rounds; round++)); do
prof=--gpt2
[ -z "${PROFILE:-}" ] || [ "$round" -gt 1 ] || prof=--profile
ALPHA_NUM_THREADS=$th timeout 300 "$dir/alpha" bench cpu $prof --json >"$work/ab.json" 2>"$work/ab.err" ||
  echo "{\"error\": \"alpha bench cpu $prof\", \"log\": \"$(tail -c 300 "$work/ab.err" | tr '\n"' ' ')\"}"
PROFILE=$([ "$prof" = --profile ] && echo 1) THREADS=$th GPT2=1 timeout 300 "$py" "$dir/torch_cpu_bench.py" >"$work/tb.json" 2>"$work/tb.err" ||
  echo "{\"error\": \"torch_cpu_bench\", \"log\": \"$(tail -c 300 "$work/tb.err" | tr '\n"' ' ')\"}"
"$py" - "$work/ab.json" "$work/tb.json" "$th" "$round" "$ratios" <<'PY'
import json, sys
try:
    a, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
except Exception as e:
    sys.exit(print(json.dumps(dict(error=f"bench json: {e}"))))
for k in ("gpt2_fwd_bwd_ms", "gpt_1layer_fwd_bwd_ms"):
    print(json.dumps(dict(what=k, threads=int(sys.argv[3]), simd_target=a.get("simd_target"), alpha=round(a[k], 2),
                          torch=round(t[k], 2), alpha_over_torch=round(a[k] / t[k], 3), round=int(sys.argv[4]))))
    print(k, sys.argv[3], round(a[k] / t[k], 3), file=open(sys.argv[5], "a"))
if int(sys.argv[4]) > 1: sys.exit()  # the profile and GEMM rates once
for who, r in (("alpha", a), ("torch", t)):
    if "gpt2_profile" in r:
        p = r["gpt2_profile"]
        print(json.dumps(dict(what="gpt2_profile", who=who, total_ms=round(p["total_ms"], 1),
                              outside_ops_ms=round(p.get("outside_ops_ms", 0), 1), page_faults=p.get("page_faults"),
                              by_op={k: round(v, 1) for k, v in sorted(p["by_op"].items(), key=lambda kv: -kv[1])})))
        for o in p["ops"][:25]:
            print(json.dumps(dict(what="gpt2_op", who=who, **o)))
for m, n in zip(a["matmul"], t["matmul"]):
    print(json.dumps(dict(what="matmul_gflops", name=m["name"], alpha=round(m["gflops"], 1), torch=round(n["gflops"], 1))))
PY
done
medians
[ -n "${SKIP_KERNELS:-}" ] || ALPHA_NUM_THREADS=$th timeout 300 "$dir/alpha" bench cpu --kernels --json 2>&1 | "$py" -c "
import json, sys
try:
    k = json.loads(sys.stdin.read())
except Exception as e:
    sys.exit(print(json.dumps(dict(error=f'kernels json: {e}'))))
print(json.dumps(dict(what='peaks', threads=k['threads'], simd_target=k['simd_target'], mem_gbs=round(k['peak_mem_gbs'], 1),
                      fma_gflops=round(k['peak_fma_gflops'], 1))))
for r in k['kernels']:
    print(json.dumps(dict(what='kernel', **{x: (round(v, 4) if isinstance(v, float) else v) for x, v in r.items()})))"
rm -rf "$work"
