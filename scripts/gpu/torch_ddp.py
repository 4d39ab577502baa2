"""PyTorch DDP peer for scripts/gpu/scaling.sh: GPT-2 124M (torch_gpt.py's model, B8 T1024 per GPU, bf16 autocast, SDPA,
fused AdamW) under torchrun with NCCL; rank 0 prints one JSON line: ranks, ms per step, tokens/s over all ranks.

Usage: torchrun --standalone --nproc-per-node N torch_ddp.py [STEPS]
"""
import json, os, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402  (the same model as the single-GPU peer)

steps, warm = (int(sys.argv[1]) if len(sys.argv) > 1 else 20), 5
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
torch.manual_seed(0)
V, T, L, H, C, B = 50304, 1024, 12, 12, 768, 8
model = DDP(GPT(V, T, L, H, C, flash=True).cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
x = torch.randint(0, V, (B, T), device="cuda")
y = torch.randint(0, V, (B, T), device="cuda")


def one():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); opt.zero_grad(set_to_none=True)


for _ in range(warm):
    one()
torch.cuda.synchronize(); dist.barrier()
t0 = time.perf_counter()
for _ in range(steps):
    one()
torch.cuda.synchronize(); dist.barrier()
dt = (time.perf_counter() - t0) / steps
if rank == 0:
    print(json.dumps(dict(peer="torch ddp bf16", ranks=world, step_ms=round(dt * 1e3, 2),
                          tokens_per_s=round(world * B * T / dt))), flush=True)
dist.destroy_process_group()
