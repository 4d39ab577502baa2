#!/usr/bin/python3
"""Fixture for the safetensors export test (tests/train/checkpoint/test_checkpoint.cpp): PyTorch loads Alpha's export and
records logits, so the C++ test can check that the exported bytes mean the same model in a GPT-2 layout.

Run with the Debian torch (no `transformers` / `safetensors` packages: the format is parsed by hand here):
  ALPHA_WRITE_EXPORT_FIXTURE=$PWD/tests/fixtures/export_tiny.safetensors build/tests/test_checkpoint -tc='*export matches*'
  /usr/bin/python3 tests/make_export_fixture.py
The first command writes the export of the test's tiny model (its byte comparison then passes trivially); this
script reads it and writes tests/fixtures/export_tiny_logits.json.

The torch model is tests/hf_reference.py's GPT-2 forward, written from the Hugging Face GPT2Model/GPT2LMHeadModel
definitions: Conv1D layers (y = x @ W + b with W of shape (in, out)), pre-LayerNorm blocks (eps 1e-5), gelu_new
(tanh approximation), causal attention, final LayerNorm and a LM head tied to wte; float64.
"""
import json
import os

import torch

import hf_reference  # tests/, beside this script: the GPT-2 forward from the HF definitions
from safetensors_torch import load_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")




def main():
    w, meta = load_safetensors(os.path.join(FIX, "export_tiny.safetensors"))
    cfg = json.loads(meta["alpha.model"])
    n_layer, n_head = cfg["n_layer"], cfg["n_head"]
    assert sum(1 for k in w if k.endswith("attn.c_attn.weight")) == n_layer
    w64 = {k: v.double() for k, v in w.items()}  # float64 reference: the C++ side is compared at 1e-5
    inputs = [[0, 1, 2, 3, 4, 5, 6, 7], [10, 9, 3, 3, 0, 5, 8, 1]]
    hf_cfg = {"model_type": "gpt2", "n_layer": n_layer, "n_head": n_head, "n_embd": w["wte.weight"].shape[1],
              "vocab_size": w["wte.weight"].shape[0], "n_positions": w["wpe.weight"].shape[0]}
    logits = hf_reference.gpt2_logits(hf_cfg, w64, torch.tensor(inputs))
    out = {"inputs": inputs, "shape": list(logits.shape), "logits": [float(v) for v in logits.flatten()]}
    with open(os.path.join(FIX, "export_tiny_logits.json"), "w") as f:
        json.dump(out, f)
    print("wrote", os.path.join(FIX, "export_tiny_logits.json"), "shape", out["shape"])


if __name__ == "__main__":
    main()
