"""PyTorch CPU peer for `alpha bench cpu`: the same matmul shapes (y = x @ w^T) and the same 1-layer GPT
forward+backward (B=12 T=64 C=128 H=4 V=65, no bias, dropout 0), medians after warm-up, THREADS threads (2).
GPT2=1 adds GPT-2 small (124M: 12 layers, 768 wide, biases, tied head) forward+backward at B4 T256, as
`alpha bench cpu --gpt2` (eager; F.scaled_dot_product_attention where torch has it). PROFILE=1 (with GPT2=1)
adds one GPT-2 step under torch.profiler: self CPU ms per op and input shapes, as `alpha bench cpu --profile`.
Usage: [THREADS=2] [GPT2=1] [PROFILE=1] python3 scripts/torch_cpu_bench.py   -> one JSON object on stdout
"""
import json, math, os, time
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(int(os.environ.get("THREADS", 2)))
SHAPES = [("cpu-recipe qkv", 768, 128, 384), ("cpu-recipe fc", 768, 128, 512), ("cpu-recipe proj", 768, 512, 128),
          ("cpu-recipe head", 768, 128, 65), ("char qkv", 2048, 384, 1152), ("char fc", 2048, 384, 1536),
          ("char proj", 2048, 1536, 384), ("square 1024", 1024, 1024, 1024), ("gpt2 fc fwd", 1024, 768, 3072),
          ("gpt2 fc dX", 1024, 3072, 768, False, False), ("gpt2 fc dW", 3072, 1024, 768, True, False)]


def median_ms(fn, warm=3, reps=15):
    for _ in range(warm):
        fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return sorted(t)[reps // 2]


def gpt_step():
    B, T, C, H, V = 12, 64, 128, 4, 65
    g = torch.Generator().manual_seed(0)
    p = lambda *s: (torch.randn(*s, generator=g) * 0.02).requires_grad_()
    wte, wpe = p(V, C), p(T, C)
    ln1, ln2, lnf = (torch.ones(C, requires_grad=True) for _ in range(3))
    attn, proj, fc, fc2 = p(3 * C, C), p(C, C), p(4 * C, C), p(C, 4 * C)
    idx = torch.zeros(B, T, dtype=torch.long)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    params = [wte, wpe, ln1, ln2, lnf, attn, proj, fc, fc2]

    def step():
        x = wte[idx] + wpe
        q, k, v = F.linear(F.layer_norm(x, (C,), ln1), attn).split(C, dim=2)
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
        a = ((q @ k.transpose(-2, -1)) / math.sqrt(C // H)).masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + F.linear((a @ v).transpose(1, 2).contiguous().view(B, T, C), proj)
        x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (C,), ln2), fc), approximate="tanh"), fc2)
        logits = F.layer_norm(x, (C,), lnf) @ wte.t()
        F.cross_entropy(logits.view(-1, V), idx.view(-1)).backward()
        for t in params:
            t.grad = None
    return median_ms(step)


out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "matmul": []}
for name, M, K, N, *flags in SHAPES:
    ta, tb = flags or (False, True)  # as alpha bench cpu: op(x) (M, K), op(w) (K, N), stored transposed if flagged
    x = torch.randn(K, M).t() if ta else torch.randn(M, K)
    w = torch.randn(N, K).t() if tb else torch.randn(K, N)
    ms = median_ms(lambda: x @ w)
    out["matmul"].append(dict(name=name, M=M, K=K, N=N, ms=ms, gflops=2 * M * K * N / (ms * 1e6)))
out["gpt_1layer_fwd_bwd_ms"] = gpt_step()


def gpt2_step():
    B, T, C, H, V, L = 4, 256, 768, 12, 50257, 12
    torch.manual_seed(0)
    wte, wpe = nn.Embedding(V, C), nn.Embedding(1024, C)
    blocks = nn.ModuleList(nn.ModuleDict(dict(ln1=nn.LayerNorm(C), attn=nn.Linear(C, 3 * C), proj=nn.Linear(C, C),
                                              ln2=nn.LayerNorm(C), fc=nn.Linear(C, 4 * C), fc2=nn.Linear(4 * C, C)))
                           for _ in range(L))
    lnf = nn.LayerNorm(C)
    params = [p for mod in (wte, wpe, blocks, lnf) for p in mod.parameters()]
    idx = torch.zeros(B, T, dtype=torch.long)
    sdpa = hasattr(F, "scaled_dot_product_attention")
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def step():
        x = wte(idx) + wpe(torch.arange(T))
        for b in blocks:
            q, k, v = b["attn"](b["ln1"](x)).split(C, dim=2)
            q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
            if sdpa:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = ((q @ k.transpose(-2, -1)) / math.sqrt(C // H)).masked_fill(~mask, float("-inf")).softmax(-1) @ v
            x = x + b["proj"](a.transpose(1, 2).contiguous().view(B, T, C))
            x = x + b["fc2"](F.gelu(b["fc"](b["ln2"](x)), approximate="tanh"))
        logits = lnf(x) @ wte.weight.t()
        F.cross_entropy(logits.view(-1, V), idx.view(-1)).backward()
        for t in params:
            t.grad = None
    return median_ms(step, warm=2, reps=5), step


def torch_profile(step):
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        step()
        total = (time.perf_counter() - t0) * 1e3
    rows = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
    by_op = {}
    for e in prof.key_averages():
        by_op[e.key] = by_op.get(e.key, 0) + e.self_cpu_time_total / 1e3
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:25]
    return dict(total_ms=total, by_op={k: round(v, 2) for k, v in top},
                ops=[dict(op=f"{e.key} {e.input_shapes}", ms=round(e.self_cpu_time_total / 1e3, 2), calls=e.count)
                     for e in rows[:30]])


if os.environ.get("GPT2") == "1":
    out["gpt2_fwd_bwd_ms"], step = gpt2_step()
    if os.environ.get("PROFILE") == "1":
        out["gpt2_profile"] = torch_profile(step)
print(json.dumps(out))
