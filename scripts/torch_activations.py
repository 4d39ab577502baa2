#!/usr/bin/python3
"""Dumps the activations of a GPT from PyTorch at the same named points as `alpha inspect` (GPT::forward's
activation observer, train/model/gpt.h), so Alpha's forward can be checked layer by layer against an independent
implementation. The model is an `alpha export` safetensors file (GPT-2 names, Conv1D layout); the forward is written
here from the Hugging Face GPT2 definitions (pre-LayerNorm blocks with eps 1e-5, gelu_new, causal attention, final
LayerNorm, LM head tied to wte) and runs in float64.

  /usr/bin/python3 scripts/torch_activations.py MODEL.safetensors --tokens 10,9,3,3,0,5,8,1 --out acts.json

Uses Debian's python3-torch only (no transformers/safetensors packages: the file is parsed by hand). The output:
{"model": file, "tokens": [...], "activations": [{"name", "shape", "values"}] in forward order,
 "attention": [{"layer", "heads": [H][T][T]}]}. tests/fixtures/export_tiny_activations.json is this script's output
for tests/fixtures/export_tiny.safetensors (regenerate with the command in tests/train/inspect/test_inspect.cpp);
the test compares Alpha's recorded activations with it.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from safetensors_torch import load_safetensors as _load  # noqa: E402


def load_safetensors(path):  # GPT-2 names without the "transformer." prefix
    tensors, meta = _load(path)
    return {k.removeprefix("transformer."): v for k, v in tensors.items()}, meta


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def forward(w, n_layer, n_head, idx, record):
    """GPT-2 forward of idx (B, T); record(name, tensor) at Alpha's observer points; returns attention probs."""
    B, T = idx.shape
    C = w["wte.weight"].shape[1]
    D = C // n_head
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = w["wte.weight"][idx] + w["wpe.weight"][:T]
    record("embed", x)
    probs = []
    for l in range(n_layer):
        p = f"h.{l}."
        h = record(p + "ln_1", ln(x, p + "ln_1"))
        qkv = record(p + "attn.qkv", h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"])  # Conv1D (in, out)
        q, k, v = (t.view(B, T, n_head, D).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(D)).masked_fill(~mask, float("-inf")).softmax(-1)  # (B, H, T, T)
        probs.append(att[0])
        y = record(p + "attn.y", (att @ v).transpose(1, 2).reshape(B, T, C))
        a = record(p + "attn.out", y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])
        x = record(p + "resid_mid", x + a)
        h = record(p + "ln_2", ln(x, p + "ln_2"))
        m = record(p + "mlp.act", gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]))
        o = record(p + "mlp.out", m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
        x = record(p + "resid", x + o)
    x = record("ln_f", ln(x, "ln_f"))
    record("logits", x @ w["wte.weight"].T)
    return probs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="an `alpha export` .safetensors file")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids (one sequence)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args()
    w, meta = load_safetensors(args.model)
    cfg = json.loads(meta["alpha.model"])
    w = {k: v.double() for k, v in w.items()}  # float64 reference
    tokens = [int(t) for t in args.tokens.split(",")]
    acts = []

    def record(name, t):
        acts.append({"name": name, "shape": list(t.shape), "values": [float(v) for v in t.flatten()]})
        return t

    probs = forward(w, cfg["n_layer"], cfg["n_head"], torch.tensor([tokens]), record)
    out = {"model": args.model.split("/")[-1], "tokens": tokens, "activations": acts,
           "attention": [{"layer": l, "heads": p.tolist()} for l, p in enumerate(probs)]}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"wrote {args.out}: {len(acts)} activations of {len(tokens)} tokens")


if __name__ == "__main__":
    main()
