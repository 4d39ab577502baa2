"""Alpha beside PyTorch on one GPU, in one run: prints one JSON line per benchmark with both figures, the ratio
(Alpha speed / PyTorch speed: 1.0 = as fast) and issue 16's goal for it. Run by scripts/gpu/compare.sh on the GPU
machine (gpu/ holds the alpha binary, configs, torch_gpt.py copied from ../shared/bench, the torch peers).

Benchmarks: GEMM 4096^3 and GPT-2 124M's linear-layer products (Alpha's per-shape coopmat tile, f16 -> f16;
PyTorch bf16 torch.matmul), causal attention fwd+bwd at B8 H12 T1024 D64 over 12 layers (Alpha's fused kernels;
PyTorch SDPA bf16), the GPT-2 124M (B8 T1024) and shakespeare_char (B64 T256) training steps (Alpha f16 with the
GPU AdamW; PyTorch bf16 autocast eager and torch.compile, fused AdamW), tokens/s and MFU.
"""
import json, os, subprocess, sys

ALPHA, G = "gpu/alpha", "gpu"
PEAK = float(os.environ.get("PEAK_TFLOPS", "989"))  # H100/H200 SXM dense bf16, for MFU


def run(cmd, timeout=300):
    print("#", " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr, flush=True)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return r.stdout


def jlines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try: out.append(json.loads(line))
            except json.JSONDecodeError: pass
    return out


def emit(bench, alpha, torch, unit, higher_better, goal=None, **extra):
    ratio = (alpha / torch) if higher_better else (torch / alpha)
    row = dict(bench=bench, unit=unit, alpha=round(alpha, 3), torch=round(torch, 3), ratio=round(ratio, 3))
    if goal is not None:
        row.update(goal=goal, met=ratio >= goal)
    row.update(extra)
    print(json.dumps(row), flush=True)


gpt2 = ["--config", f"{G}/configs/gpt2_124m.json", "--set", "train.grad_accum=1"]
shakes = ["--config", f"{G}/configs/shakespeare_char.json", "--set", "model.precision=f16", "--set", "model.dropout=0.0"]
# ---- Alpha
tiles = json.loads(run([ALPHA, "bench", "gpu", "--tiles", "--json"] + gpt2))
att_step = json.loads(run([ALPHA, "bench", "gpu", "--only", "attention,step", "--json", "--peak-tflops", str(PEAK)] + gpt2))
sh_step = json.loads(run([ALPHA, "bench", "gpu", "--only", "step", "--json", "--peak-tflops", str(PEAK)] + shakes))
# ---- PyTorch
tg_out = run(["python3", f"{G}/torch_gemm.py", "8192", "768", "50304"])
tg = {r["name"]: r for r in jlines(tg_out)}
ta = {r["dtype"]: r for r in jlines(run(["python3", f"{G}/torch_attention.py", "8", "12", "1024", "64", "12"]))}
tp = jlines(run(["python3", f"{G}/torch_gpt.py", "speed"], timeout=500))
print(json.dumps(dict(device=tiles.get("device"), torch=tg_out.splitlines()[0])), flush=True)

for r in tiles["gemm"]:
    peer = tg.get(r["name"])
    if peer is None: continue
    emit("gemm " + r["name"], r["auto"]["tflops"], peer["bf16"], "TFLOP/s", True,
         goal=0.5 if r["name"] == "square 4096" else None, tile=r["auto"]["tile"], M=r["M"], K=r["K"], N=r["N"])
a = att_step["attention"]
# Wall clock of whole fwd+bwd calls on both sides (the peer: CUDA events); the sum of Alpha's kernel timestamps beside.
emit("attention fwd+bwd causal B8 H12 T1024 D64 x12 layers", a["fwd_bwd_wall_ms"] * 12, ta["bf16"]["fwd_bwd_ms_layers"],
     "ms", False, goal=0.5, alpha_kernels_ms=round(a["fwd_bwd_ms"] * 12, 3), alpha_fwd_ms=a["fwd_ms"],
     torch_fwd_ms=ta["bf16"]["fwd_ms"])


def torch_ms(cfg, compiled):
    for r in tp:
        if r.get("cfg", "").startswith(cfg) and r.get("prec") == "bf16" and r.get("compile") == compiled and "ms" in r:
            return r
    return None


for name, step, cfg in (("gpt2-124M step B8 T1024", att_step["step"], "gpt2"),
                        ("shakespeare_char step B64 T256", sh_step["step"], "shakespeare")):
    for compiled in (False, True):
        peer = torch_ms(cfg, compiled)
        if peer is None: continue
        emit(f"{name} vs bf16 {'torch.compile' if compiled else 'eager'}", step["step_ms"], peer["ms"], "ms", False,
             goal=None if compiled else 1.0, alpha_tok_s=round(step["tokens_per_s"]), torch_tok_s=peer["tok_s"],
             alpha_mfu=round(step.get("mfu", 0), 3), torch_tflops=peer["tflops"])
