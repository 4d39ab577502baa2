#!/usr/bin/env bash
# GPU machine with several GPUs (issue 21): GPT-2 124M (f16, B8 T1024 per GPU) trained by
# `mpirun -np N alpha train` for N = 1, 2 and the machine's GPU count (or the N given), beside PyTorch DDP (torchrun,
# NCCL, bf16; torch_ddp.py) on the same N, all in one call; one JSON line per run with tokens/s, the scaling efficiency
# (tokens/s at N / (N x tokens/s at 1), each trainer against its own N = 1) and the all-reduce share of the step.
# Needs (carry .gl gpu gpu-mpi): gpu-mpi/ as for data_parallel_gpu.sh (alpha + OpenMPI debs), gpu/lib,
# gpu/tinyshakespeare.txt, gpu/torch_gpt.py (../shared/bench), gpu/torch_ddp.py. Usage: bash gpu/scaling.sh [N...]
set -u
source "$(dirname "$0")/mpi_setup.sh"
GPUS=$(nvidia-smi -L | wc -l)
NS=${*:-$(printf '%s\n' 1 2 "$GPUS" | awk '!seen[$0]++ && $0 <= '"$GPUS")}
A=gpu-mpi/alpha
C="gpu/configs/gpt2_124m.json --quiet --set data.path=gpu/tinyshakespeare.txt --set data.tokenizer=char
   --set data.val_fraction=0.1 --set train.grad_accum=1 --set train.eval_interval=100000 --set train.eval_iters=1
   --set train.sample_tokens=0 --set train.log_interval=1 --set checkpoint.interval=100000 --set device=vulkan
   --set train.max_steps=${STEPS:-30} --set optim.device=${OPTIM_DEVICE:-gpu}"  # AdamW state on each GPU (cpu: host)
for n in $NS; do
  echo "== alpha, $n rank(s)"
  ALPHA_NUM_THREADS=$(( $(nproc) / n )) timeout 400 $MPIRUN -np $n --bind-to none $A train $C --set out_dir=$OUT/alpha$n \
    > $OUT/alpha$n.log 2>&1 || tail -20 $OUT/alpha$n.log
  echo "== torch ddp, $n rank(s)"
  timeout 300 python3 -m torch.distributed.run --standalone --nproc-per-node $n gpu/torch_ddp.py > $OUT/torch$n.log 2>&1 ||
    tail -20 $OUT/torch$n.log
done
python3 - $OUT $NS <<'PY'
import json, sys, statistics as st
out, ns = sys.argv[1], [int(n) for n in sys.argv[2:]]
base = {}
for n in ns:
    try:
        r = [json.loads(l) for l in open(f"{out}/alpha{n}/metrics.jsonl") if '"type":"step"' in l][5:]
        med = lambda k: st.median(x[k] for x in r) if r and k in r[0] else None
        ms = med("step_ms"); tps = 8 * 1024 * n / (ms / 1e3)
        base.setdefault("alpha", tps)
        ar = med("allreduce_wait_ms")
        print(json.dumps(dict(trainer="alpha f16", ranks=n, step_ms=round(ms, 2), tokens_per_s=round(tps),
                              efficiency=round(tps / (n * base["alpha"]), 3), allreduce_ms=med("allreduce_ms"),
                              exposed_allreduce_share=round(ar / ms, 3) if ar is not None else None)))
    except Exception as e:
        print(json.dumps(dict(trainer="alpha f16", ranks=n, error=str(e)[:200])))
    try:
        t = [json.loads(l) for l in open(f"{out}/torch{n}.log") if l.startswith("{")][-1]
        base.setdefault("torch", t["tokens_per_s"])
        print(json.dumps(dict(trainer="torch ddp bf16", ranks=n, step_ms=t["step_ms"], tokens_per_s=t["tokens_per_s"],
                              efficiency=round(t["tokens_per_s"] / (n * base["torch"]), 3))))
    except Exception as e:
        print(json.dumps(dict(trainer="torch ddp bf16", ranks=n, error=str(e)[:200])))
PY
