"""PyTorch GEMM peer for `alpha bench gpu`: the same shapes (4096^3 and a GPT's linear layers, every transpose
of a training step), torch.matmul in fp32 (TF32 off), fp16 and bf16; CUDA events, warm-up, median of 10.

Usage: python3 torch_gemm.py [BT C V]   (default shakespeare_char: BT = 64*256, C = 384, V = 65)
"""
import json, sys
import torch

def ms_of(fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


if __name__ == "__main__":  # torch_attention.py imports ms_of
    BT, C, V = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (64 * 256, 384, 65)
    torch.backends.cuda.matmul.allow_tf32 = False
    cases = [("square 4096", 4096, 4096, 4096, False, False)]
    for name, i, o in (("qkv", C, 3 * C), ("attn proj", C, C), ("fc", C, 4 * C), ("proj", 4 * C, C), ("head", C, V)):
        cases += [(name + " fwd x@W^T", BT, i, o, False, True), (name + " dx dy@W", BT, o, i, False, False),
                  (name + " dW dy^T@x", o, BT, i, True, False)]
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for name, M, K, N, ta, tb in cases:
        row = dict(name=name, M=M, K=K, N=N)
        for dt_name, dt in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
            a = torch.randn((K, M) if ta else (M, K), device="cuda", dtype=dt)
            b = torch.randn((N, K) if tb else (K, N), device="cuda", dtype=dt)
            x, y = (a.t() if ta else a), (b.t() if tb else b)
            ms = ms_of(lambda: torch.matmul(x, y))
            row[dt_name] = round(2 * M * K * N / (ms * 1e9), 2)
        print(json.dumps(row), flush=True)
