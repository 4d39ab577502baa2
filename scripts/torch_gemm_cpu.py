# torch.mm GFLOP/s (f32, median of 5) at the shapes of scripts/blas_gemm_compare.cpp.
# Usage: python3 scripts/torch_gemm_cpu.py THREADS
import sys
import time

import torch

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 16)
print("torch", torch.__version__, "threads", torch.get_num_threads())
shapes = [("qkv x@W^T", 1024, 2304, 768, 0, 1), ("proj x@W^T", 1024, 768, 768, 0, 1), ("fc x@W^T", 1024, 3072, 768, 0, 1),
          ("fcproj x@W^T", 1024, 768, 3072, 0, 1), ("head x@W^T", 1024, 50257, 768, 0, 1), ("fc dX dY@W", 1024, 768, 3072, 0, 0),
          ("fcproj dX", 1024, 3072, 768, 0, 0), ("head dX", 1024, 768, 50257, 0, 0), ("fc dW dY^T@X", 3072, 768, 1024, 1, 0),
          ("head dW", 50257, 768, 1024, 1, 0), ("recipe x@W^T", 16384, 1536, 384, 0, 1), ("recipe dW", 1536, 384, 16384, 1, 0)]
for name, M, N, K, ta, tb in shapes:
    a = torch.full((K, M) if ta else (M, K), 0.01)
    b = torch.full((N, K) if tb else (K, N), 0.02)
    a = a.t() if ta else a
    b = b.t() if tb else b
    torch.mm(a, b)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        torch.mm(a, b)
        ts.append(time.perf_counter() - t0)
    ts.sort()
    print(f"{name:14s} {M:6d} x {N:6d} x {K:6d}  torch {2 * M * N * K / ts[2] / 1e9:7.1f} GFLOP/s", flush=True)
