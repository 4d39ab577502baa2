#!/usr/bin/python3
"""Fixture for the safetensors export test (tests/train/checkpoint/test_checkpoint.cpp): PyTorch loads Alpha's export and
records logits, so the C++ test can check that the exported bytes mean the same model in a GPT-2 layout.

Run with the Debian torch (no `transformers` / `safetensors` packages: the format is parsed by hand here):
  ALPHA_WRITE_EXPORT_FIXTURE=$PWD/tests/fixtures/export_tiny.safetensors build/tests/test_checkpoint -tc='*export matches*'
  /usr/bin/python3 tests/make_export_fixture.py
The first command writes the export of the test's tiny model (its byte comparison then passes trivially); this
script reads it and writes tests/fixtures/export_tiny_logits.json.

The torch model below is a GPT-2 forward written from the Hugging Face GPT2Model/GPT2LMHeadModel definitions:
Conv1D layers (y = x @ W + b with W of shape (in, out)), pre-LayerNorm blocks (eps 1e-5), gelu_new (tanh
approximation), causal attention, final LayerNorm and a LM head tied to wte.
"""
import json
import math
import os

import torch

from safetensors_torch import load_safetensors  # tests/, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")




def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_logits(w, n_layer, n_head, idx):
    B, T = idx.shape
    x = w["wte.weight"][idx] + w["wpe.weight"][:T]
    C = x.shape[-1]
    D = C // n_head
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(n_layer):
        p = f"h.{l}."
        h = torch.nn.functional.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: (in, out)
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, n_head, D).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = torch.nn.functional.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        m = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = torch.nn.functional.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return x @ w["wte.weight"].T


def main():
    w, meta = load_safetensors(os.path.join(FIX, "export_tiny.safetensors"))
    cfg = json.loads(meta["alpha.model"])
    n_layer, n_head = cfg["n_layer"], cfg["n_head"]
    assert sum(1 for k in w if k.endswith("attn.c_attn.weight")) == n_layer
    w64 = {k: v.double() for k, v in w.items()}  # float64 reference: the C++ side is compared at 1e-5
    inputs = [[0, 1, 2, 3, 4, 5, 6, 7], [10, 9, 3, 3, 0, 5, 8, 1]]
    logits = gpt2_logits(w64, n_layer, n_head, torch.tensor(inputs))
    out = {"inputs": inputs, "shape": list(logits.shape), "logits": [float(v) for v in logits.flatten()]}
    with open(os.path.join(FIX, "export_tiny_logits.json"), "w") as f:
        json.dump(out, f)
    print("wrote", os.path.join(FIX, "export_tiny_logits.json"), "shape", out["shape"])


if __name__ == "__main__":
    main()
