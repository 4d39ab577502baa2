"""PyTorch attention peer for scripts/gpu/compare.sh: causal scaled_dot_product_attention forward + backward
(bf16 and fp16, the flash kernel PyTorch picks), at GPT-2 124M's shape (B8 H12 T1024 D64) unless given; CUDA
events, warm-up, median of 20. Prints one JSON line per dtype: ms per fwd+bwd and per layer count.

Usage: python3 torch_attention.py [B H T D [LAYERS]]
"""
import json, sys
import torch
import torch.nn.functional as F

from torch_gemm import ms_of  # CUDA events, warm-up, median

B, H, T, D = (int(x) for x in sys.argv[1:5]) if len(sys.argv) >= 5 else (8, 12, 1024, 64)
L = int(sys.argv[5]) if len(sys.argv) >= 6 else 12


for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, T, D, device="cuda", dtype=dt)

    def fwd_bwd():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(g)

    fwd = ms_of(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps=20, warm=5)
    both = ms_of(fwd_bwd, reps=20, warm=5)
    # Causal FLOPs: forward 2 matmuls (QK^T, PV), backward 5 (recomputed S included), each half of T x T.
    flops = 4 * B * H * T * T * D / 2 * (1 + 2.5)
    print(json.dumps(dict(dtype=name, B=B, H=H, T=T, D=D, fwd_ms=round(fwd, 4), fwd_bwd_ms=round(both, 4),
                          layers=L, fwd_bwd_ms_layers=round(both * L, 3), tflops=round(flops / (both * 1e9), 1))),
          flush=True)
