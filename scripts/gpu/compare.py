"""Alpha beside PyTorch on one GPU, in one run: prints one JSON line per benchmark with both figures, the ratio
(Alpha speed / PyTorch speed: 1.0 = as fast) and issue 16's goal for it. Run by scripts/gpu/compare.sh on the GPU
machine (gpu/ holds the alpha binary, configs, torch_gpt.py copied from ../shared/bench, the torch peers).

Benchmarks: GEMM 4096^3 and GPT-2 124M's linear-layer products (Alpha's per-shape choice: a PTX variant on Hopper,
else a coopmat tile; f16 -> f16;
PyTorch bf16 torch.matmul), causal attention fwd+bwd at B8 H12 T1024 D64 over 12 layers (Alpha's fused kernels;
PyTorch SDPA bf16), the GPT-2 124M (B8 T1024) and shakespeare_char (B64 T256) training steps (Alpha f16 with the
GPU AdamW; PyTorch bf16 autocast eager and torch.compile, fused AdamW), tokens/s and MFU.
"""
import json, os, subprocess, sys

ALPHA, G = os.environ.get("ALPHA", "gpu/alpha"), os.environ.get("G", "gpu")
PEAK = float(os.environ.get("PEAK_TFLOPS", "989"))  # H100/H200 SXM dense bf16, for MFU
if not os.access(ALPHA, os.X_OK):  # the paths are the repository root's (gpu/alpha, gpu/configs ...)
    raise SystemExit(f"[compare] {ALPHA} is not an executable: run from the repository root, or set ALPHA and G")


def show(row):
    """One JSON line on stdout, and in $OUT/compare.jsonl when OUT is set (the device tool brings $OUT back whole,
    where a call's printed output may come back cut)."""
    print(json.dumps(row), flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "compare.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")


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
    show(row)


gpt2 = ["--config", f"{G}/configs/gpt2_124m.json", "--set", "train.grad_accum=1"]
shakes = ["--config", f"{G}/configs/shakespeare_char.json", "--set", "model.precision=f16", "--set", "model.dropout=0.0"]
# ROUNDS=N (default 1): the attention and step benchmarks of both sides N times, alternating Alpha and PyTorch; each
# row then quotes the medians and the median of the per-round ratios (the peers' times move by up to 1.5x between
# calls on this shared machine). The GEMM rows run once.
ROUNDS = int(os.environ.get("ROUNDS", "1"))
# The per-shape choice alone ("auto"), timed over 5 rounds (a sweep of every tile took a minute more of each call).
tiles = json.loads(run([ALPHA, "bench", "gpu", "--tiles", "--alternate", "auto", "--json"] + gpt2))
tg_out = run(["python3", f"{G}/torch_gemm.py", "8192", "768", "50304"])
tg = {r["name"]: r for r in jlines(tg_out)}
show(dict(device=tiles.get("device"), torch=tg_out.splitlines()[0], rounds=ROUNDS))
for r in tiles["gemm"]:  # first, so that a call cut short keeps them
    peer, auto = tg.get(r["name"]), r["alternate"]["auto"]
    if peer is None: continue
    emit("gemm " + r["name"], auto["tflops"], peer["bf16"], "TFLOP/s", True,
         goal=0.5 if r["name"] == "square 4096" else None, tile=auto["tile"], M=r["M"], K=r["K"], N=r["N"])
rounds = []
for _ in range(ROUNDS):
    # The attention bench and the GPT-2 step in processes of their own, as `alpha train` runs (sessions 42-43: a step
    # bench after the attention bench in one process spread from 29.7 to 33.1 ms, one started alone stays flat).
    att = json.loads(run([ALPHA, "bench", "gpu", "--only", "attention", "--json", "--peak-tflops", str(PEAK)] + gpt2))
    att_step = json.loads(run([ALPHA, "bench", "gpu", "--only", "step", "--json", "--peak-tflops", str(PEAK)] + gpt2))
    att_step["attention"] = att["attention"]
    sh_step = json.loads(run([ALPHA, "bench", "gpu", "--only", "step", "--json", "--peak-tflops", str(PEAK)] + shakes))
    ta = {r["dtype"]: r for r in jlines(run(["python3", f"{G}/torch_attention.py", "8", "12", "1024", "64", "12"]))}
    tp = jlines(run(["python3", f"{G}/torch_gpt.py", "speed"], timeout=500))
    rounds.append(dict(att_step=att_step, sh_step=sh_step, ta=ta, tp=tp))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def emit_rounds(bench, pairs, unit, goal, **extra):
    """pairs: (alpha ms, torch ms) per round; one row with the medians and the median ratio (torch / alpha)."""
    ratios = [t / a for a, t in pairs]
    row = dict(bench=bench, unit=unit, alpha=round(median([a for a, _ in pairs]), 3),
               torch=round(median([t for _, t in pairs]), 3), ratio=round(median(ratios), 3))
    if goal is not None:
        row.update(goal=goal, met=row["ratio"] >= goal)
    if len(pairs) > 1:
        row["rounds"] = [[round(a, 3), round(t, 3), round(t / a, 3)] for a, t in pairs]
    row.update(extra)
    show(row)


# Wall clock of whole fwd+bwd calls on both sides (the peer: CUDA events); the sum of Alpha's kernel timestamps beside.
a0 = rounds[0]["att_step"]["attention"]
emit_rounds("attention fwd+bwd causal B8 H12 T1024 D64 x12 layers",
            [(r["att_step"]["attention"]["fwd_bwd_wall_ms"] * 12, r["ta"]["bf16"]["fwd_bwd_ms_layers"]) for r in rounds],
            "ms", 0.5, alpha_kernels_ms=round(a0["fwd_bwd_ms"] * 12, 3), alpha_fwd_ms=a0["fwd_ms"],
            torch_fwd_ms=rounds[0]["ta"]["bf16"]["fwd_ms"])


def torch_ms(tp, cfg, compiled):
    for r in tp:
        if r.get("cfg", "").startswith(cfg) and r.get("prec") == "bf16" and r.get("compile") == compiled and "ms" in r:
            return r
    return None


for name, key, cfg in (("gpt2-124M step B8 T1024", "att_step", "gpt2"), ("shakespeare_char step B64 T256", "sh_step", "shakespeare")):
    for compiled in (False, True):
        peers = [torch_ms(r["tp"], cfg, compiled) for r in rounds]
        if any(p is None for p in peers): continue
        steps = [r[key]["step"] for r in rounds]
        emit_rounds(f"{name} vs bf16 {'torch.compile' if compiled else 'eager'}",
                    [(s["step_ms"], p["ms"]) for s, p in zip(steps, peers)], "ms", None if compiled else 1.0,
                    alpha_tok_s=round(steps[0]["tokens_per_s"]), torch_tok_s=peers[0]["tok_s"],
                    alpha_mfu=round(steps[0].get("mfu", 0), 3), torch_tflops=peers[0]["tflops"],
                    # the GPU's busy and idle ms per Alpha step (edge-timed steps after the timed ones), every round
                    alpha_gpu_busy_ms=[round(s.get("gpu_busy_ms", 0), 3) for s in steps],
                    alpha_gpu_idle_ms=[round(s.get("gpu_idle_ms", 0), 3) for s in steps],
                    alpha_step_ms_each=[s.get("step_ms_each") for s in steps])
