#!/usr/bin/env bash
# GPU machine (issue 17): 2 MPI ranks sharing one GPU against one process at the same global batch (64).
# Needs in the checkout sent (all ignored, named in `carry`): gpu-mpi/alpha (this build), gpu-mpi/debs/*.deb (apt-get
# download openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
# libevent-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1
# libnuma1 libltdl7 libmunge2 libxnvctrl0), .gl (the Vulkan loader), gpu/lib, gpu/tinyshakespeare.txt.
set -u
source "$(dirname "$0")/mpi_setup.sh"
$MPIRUN -np 2 --oversubscribe hostname 2>&1 | tail -20
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
$MPIRUN --version | head -1
A=gpu-mpi/alpha
C="configs/shakespeare_char.json --quiet --set data.path=gpu/tinyshakespeare.txt --set train.eval_interval=100000
   --set train.eval_iters=1 --set train.sample_tokens=0 --set train.log_interval=1 --set checkpoint.interval=100000
   --set device=vulkan --set train.max_steps=30 --set model.dropout=0"
echo "== 1 process B=64";           timeout 150 $A train $C --set out_dir=$OUT/one64 2>&1 | tail -3
echo "== 1 process B=32 x accum 2"; timeout 150 $A train $C --set out_dir=$OUT/one32x2 --set train.batch_size=32 --set train.grad_accum=2 2>&1 | tail -3
echo "== 2 ranks B=32 on one GPU";  ALPHA_NUM_THREADS=8 timeout 200 $MPIRUN -np 2 --oversubscribe --bind-to none $A train $C --set out_dir=$OUT/two32 --set train.batch_size=32 2>&1 | tail -40
python3 - $OUT <<'PY'
import json, sys, statistics as st
for d in ("one64", "one32x2", "two32"):
    try: r=[json.loads(l) for l in open(f"{sys.argv[1]}/{d}/metrics.jsonl") if '"type":"step"' in l][5:]
    except Exception as e: print(d, "no metrics", e); continue
    med=lambda k: round(st.median(x[k] for x in r), 2) if k in r[0] else None
    print(d, "steps", len(r), "median step_ms", med("step_ms"), "slowest rank", med("max_rank_step_ms"),
          "allreduce_ms", med("allreduce_ms"), "exposed", med("allreduce_wait_ms"), "grad_copy_ms", med("grad_copy_ms"),
          "bytes", r[-1].get("allreduce_bytes"), "loss", r[-1]["loss"])
PY
