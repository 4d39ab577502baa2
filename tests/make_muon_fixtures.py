#!/usr/bin/python3
"""Writes the PyTorch reference fixture for tests/test_muon.cpp.

Run with Debian's torch (CPU):   /usr/bin/python3 tests/make_muon_fixtures.py
Output: tests/fixtures/optim_muon.json (~75 KB, deterministic for a given torch version):
  {
    "torch_version": str,
    "newton_schulz": [{"shape": [r, c], "steps": int, "coefficients": [a, b, c], "g": [float], "out": [float]}],
    "runs": [{                        # Muon for 2-D block matrices + torch.optim.AdamW for the rest
      "muon": {"lr", "base_lr", "momentum", "weight_decay", "nesterov", "ns_steps", "coefficients"},
      "adamw": {"beta1", "beta2", "eps", "weight_decay"},
      "params": [{"name": str, "shape": [int], "muon": bool, "init": [float]}],
      "steps": [{"lr": float,          # the AdamW lr of the step; Muon's is lr * muon.lr / muon.base_lr
                 "grads": [[float]], "params": [[float]],
                 "state": [[float]]}]  # per param: Muon's momentum buffer, or AdamW's exp_avg
    }]
  }
Newton-Schulz and the Muon update are modded-nanogpt's zeropower_via_newtonschulz5 and Keller Jordan's
muon.py muon_update (github.com/KellerJordan/Muon), verbatim apart from running in f32 instead of bf16.
Values are f32 numbers written as exact decimal doubles.
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def zeropower_via_newtonschulz5(G, steps, coefficients):
    assert G.ndim >= 2
    a, b, c = coefficients
    X = G.float()
    if G.size(-2) > G.size(-1):
        X = X.mT
    # Ensure spectral norm is at most 1
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def muon_update(grad, momentum, beta, ns_steps, nesterov, coefficients):
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    update = zeropower_via_newtonschulz5(update, ns_steps, coefficients)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


def make_newton_schulz():
    torch.manual_seed(7)
    cases = []
    for shape, steps, coeffs in (([8, 8], 5, (3.4445, -4.7750, 2.0315)),
                                 ([12, 5], 5, (3.4445, -4.7750, 2.0315)),
                                 ([5, 12], 5, (3.4445, -4.7750, 2.0315)),
                                 ([10, 14], 3, (3.4445, -4.7750, 2.0315)),
                                 ([6, 9], 8, (2.0, -1.5, 0.5))):  # cubic-like coefficients: converges slowly
        g = torch.randn(*shape, dtype=torch.float32) * 0.3
        out = zeropower_via_newtonschulz5(g, steps, coeffs)
        cases.append({"shape": shape, "steps": steps, "coefficients": list(coeffs), "g": flat(g), "out": flat(out)})
    return cases


def make_run(seed, nesterov, muon_wd):
    torch.manual_seed(seed)
    muon_opt = {"lr": 0.05, "base_lr": 1e-2, "momentum": 0.95, "weight_decay": muon_wd, "nesterov": nesterov,
                "ns_steps": 5, "coefficients": [3.4445, -4.7750, 2.0315]}
    adam_opt = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
    specs = [("transformer.wte.weight", [7, 4], False), ("transformer.h.0.attn.c_attn.weight", [12, 4], True),
             ("transformer.h.0.attn.c_attn.bias", [12], False), ("transformer.h.0.mlp.c_proj.weight", [4, 16], True)]
    params = [torch.randn(*s, dtype=torch.float32).requires_grad_(True) for _, s, _ in specs]
    init = [flat(p) for p in params]
    muon_params = [p for p, (_, _, m) in zip(params, specs) if m]
    adam = [p for p, (_, _, m) in zip(params, specs) if not m]
    decay = [p for p in adam if p.dim() >= 2]
    no_decay = [p for p in adam if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": adam_opt["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(adam_opt["beta1"], adam_opt["beta2"]), eps=adam_opt["eps"])
    bufs = {id(p): torch.zeros_like(p) for p in muon_params}
    steps = []
    for lr in (1e-2, 6e-3, 2e-3):
        grads = [torch.randn(*p.shape, dtype=torch.float32) * 0.1 for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        mlr = lr / muon_opt["base_lr"] * muon_opt["lr"]
        with torch.no_grad():
            for p in muon_params:
                update = muon_update(p.grad, bufs[id(p)], muon_opt["momentum"], muon_opt["ns_steps"], nesterov,
                                     muon_opt["coefficients"])
                p.mul_(1 - mlr * muon_wd)
                p.add_(update.reshape(p.shape), alpha=-mlr)
        steps.append({"lr": lr, "grads": [flat(g) for g in grads], "params": [flat(p) for p in params],
                      "state": [flat(bufs[id(p)]) if id(p) in bufs else flat(opt.state[p]["exp_avg"])
                                for p in params]})
    return {"muon": muon_opt, "adamw": adam_opt,
            "params": [{"name": n, "shape": s, "muon": m, "init": v} for (n, s, m), v in zip(specs, init)],
            "steps": steps}


def main():
    os.makedirs(FIXTURES, exist_ok=True)
    data = {"torch_version": torch.__version__, "newton_schulz": make_newton_schulz(),
            "runs": [make_run(11, True, 0.01), make_run(12, False, 0.0)]}
    path = os.path.join(FIXTURES, "optim_muon.json")
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
