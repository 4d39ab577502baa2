#!/usr/bin/python3
"""Writes the PyTorch reference fixtures for tests/test_optim.cpp.

Run with Debian's torch (CPU):   /usr/bin/python3 tests/make_optim_fixtures.py
Output (each well under 100 KB, deterministic for a given torch version):

tests/fixtures/optim_adamw.json -- torch.optim.AdamW + clip_grad_norm_ replayed over a few steps:
  {
    "torch_version": str,
    "options": {"beta1", "beta2", "eps", "weight_decay", "max_norm"},
    "params": [{"name": str, "shape": [int], "decay": bool, "init": [float]}],   # f32 values, row-major
    "steps": [{                      # one entry per optimizer step, in order
      "lr": float,                   # learning rate of this step
      "grads": [[float]],            # per param: grad before clipping (what the C++ test sets)
      "norm": float,                 # clip_grad_norm_'s return value (pre-clip global L2 norm, f32)
      "clipped": bool,               # norm > max_norm, so the grads were scaled
      "clipped_grads": [[float]],    # per param: grad after clip_grad_norm_
      "params": [[float]],           # per param: value after the step
      "exp_avg": [[float]],          # per param: AdamW's m after the step
      "exp_avg_sq": [[float]]        # per param: AdamW's v after the step
    }]
  }
  Params with dim() >= 2 are in a param group with weight_decay, the others in a group with weight_decay 0
  (nanoGPT's grouping, which Alpha's AdamW applies automatically). Float values are f32 numbers written as
  exact decimal doubles.

tests/fixtures/optim_schedule.json -- learning-rate schedule values:
  {"cases": [{"kind": "constant"|"cosine"|"linear"|"wsd", "lr", "min_lr", "warmup_steps", "decay_steps",
              "wsd_decay_fraction", "steps": [int], "values": [float]}]}
  cosine uses nanoGPT's get_lr verbatim where it is defined (decay_steps > warmup_steps); the other schedules
  and the empty-decay-span cases follow the semantics documented in optim/schedule.h, written here
  independently of the C++ code.
"""
import json
import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def make_adamw():
    torch.manual_seed(1234)
    beta1, beta2, eps, wd, max_norm = 0.9, 0.95, 1e-8, 0.1, 1.0
    specs = [("weight", [6, 5]), ("bias", [5]), ("cube", [2, 3, 4])]
    params = [torch.randn(*shape, dtype=torch.float32).requires_grad_(True) for _, shape in specs]
    init = [flat(p) for p in params]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(beta1, beta2), eps=eps, weight_decay=wd)
    lrs = [1e-2, 3e-2, 2e-2, 5e-3, 1e-2]
    grad_scales = [0.05, 1.0, 0.3, 2.0, 0.08]  # global norms ~0.4 .. 15: some steps clip, some do not
    steps = []
    for lr, gs in zip(lrs, grad_scales):
        grads = [torch.randn(*p.shape, dtype=torch.float32) * gs for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        for group in opt.param_groups:
            group["lr"] = lr
        clipped = [flat(p.grad) for p in params]
        opt.step()
        steps.append({
            "lr": lr,
            "grads": [flat(g) for g in grads],
            "norm": norm,
            "clipped": norm > max_norm,
            "clipped_grads": clipped,
            "params": [flat(p) for p in params],
            "exp_avg": [flat(opt.state[p]["exp_avg"]) for p in params],
            "exp_avg_sq": [flat(opt.state[p]["exp_avg_sq"]) for p in params],
        })
    assert any(s["clipped"] for s in steps) and not all(s["clipped"] for s in steps)
    return {
        "torch_version": torch.__version__,
        "options": {"beta1": beta1, "beta2": beta2, "eps": eps, "weight_decay": wd, "max_norm": max_norm},
        "params": [{"name": n, "shape": s, "decay": len(s) >= 2, "init": v} for (n, s), v in zip(specs, init)],
        "steps": steps,
    }


# ---- schedules ----

def nanogpt_get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    # nanoGPT train.py get_lr, verbatim apart from the parameters.
    # 1) linear warmup for warmup_iters steps
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    # 2) if it > lr_decay_iters, return min learning rate
    if it > lr_decay_iters:
        return min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
    return min_lr + coeff * (learning_rate - min_lr)


def round_half_away(x):
    # C++ std::llround for x >= 0 (Python's round() would round halves to even).
    return int(math.floor(x + 0.5))


def reference_lr(c, it):
    lr, min_lr, w, d = c["lr"], c["min_lr"], c["warmup_steps"], c["decay_steps"]
    kind = c["kind"]
    if it < w:
        return lr * (it + 1) / (w + 1)
    if kind == "constant":
        return lr
    if kind == "cosine":
        if d > w:
            return nanogpt_get_lr(it, lr, min_lr, w, d)
        return min_lr  # empty decay span: min_lr right after warmup
    if kind == "linear":
        if d <= w or it >= d:
            return min_lr
        return lr + (it - w) / (d - w) * (min_lr - lr)
    if kind == "wsd":
        start = max(w, d - round_half_away(c["wsd_decay_fraction"] * d))
        if it >= d:
            return min_lr
        if it < start:
            return lr
        return lr + (it - start) / (d - start) * (min_lr - lr)
    raise ValueError(kind)


def make_schedule():
    cases = [
        # kind, lr, min_lr, warmup, decay, wsd fraction, last step
        ("cosine", 6e-4, 6e-5, 10, 100, 0.2, 110),   # nanoGPT's shape
        ("cosine", 1e-3, 1e-4, 0, 50, 0.2, 60),      # no warmup
        ("cosine", 1e-3, 1e-4, 10, 10, 0.2, 15),     # empty decay span
        ("cosine", 1e-3, 1e-4, 10, 5, 0.2, 15),      # decay_steps < warmup_steps
        ("linear", 1e-3, 1e-5, 5, 40, 0.2, 50),
        ("linear", 2e-3, 0.0, 0, 16, 0.2, 20),
        ("linear", 1e-3, 1e-4, 8, 8, 0.2, 12),       # empty decay span
        ("constant", 3e-4, 1e-5, 7, 20, 0.2, 30),
        ("constant", 3e-4, 1e-5, 0, 20, 0.2, 5),
        ("wsd", 1e-3, 1e-4, 10, 100, 0.2, 110),      # decay starts at 80
        ("wsd", 1e-3, 1e-4, 2, 10, 0.25, 12),        # 2.5 rounds to 3: decay starts at 7
        ("wsd", 1e-3, 1e-4, 3, 20, 0.0, 25),         # no decay phase: lr until 20, then min_lr
        ("wsd", 1e-3, 1e-4, 4, 20, 1.0, 25),         # decay right after warmup
        ("wsd", 1e-3, 1e-4, 5, 10, 0.9, 12),         # decay start clamped to the end of warmup
    ]
    out = []
    for kind, lr, min_lr, w, d, frac, last in cases:
        c = {"kind": kind, "lr": lr, "min_lr": min_lr, "warmup_steps": w, "decay_steps": d,
             "wsd_decay_fraction": frac}
        c["steps"] = list(range(last + 1))
        c["values"] = [reference_lr(c, it) for it in c["steps"]]
        out.append(c)
    return {"cases": out}


def main():
    os.makedirs(FIXTURES, exist_ok=True)
    for name, data in (("optim_adamw.json", make_adamw()), ("optim_schedule.json", make_schedule())):
        path = os.path.join(FIXTURES, name)
        with open(path, "w") as f:
            json.dump(data, f, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
