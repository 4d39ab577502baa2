#!/usr/bin/python3
"""GPT-2 or Llama built in plain PyTorch from a Hugging Face model directory, by the HF names and config keys.

`transformers` cannot be installed here (no PyPI), so this is GPT2LMHeadModel's forward written out from its
definition (modeling_gpt2.py): Conv1D layers (y = x @ W + b, W of shape (in, out)), pre-LayerNorm blocks with
config.layer_norm_epsilon, the activation named by config.activation_function (gelu_new: the tanh GELU),
causal attention scaled by 1/sqrt(head size), final LayerNorm, LM head tied to transformer.wte (or
lm_head.weight when the file has one). Everything it needs comes from config.json (n_embd, n_layer, n_head,
n_positions, vocab_size, layer_norm_epsilon, activation_function, tie_word_embeddings) and model.safetensors
(GPT2LMHeadModel's names: transformer.h.N.attn.c_attn.weight ...; GPT2Model's unprefixed names also load).
config.json's model_type "llama" selects LlamaForCausalLM's forward (modeling_llama.py): RMSNorm (rms_norm_eps),
rotate-half RoPE (rope_theta, head_dim), grouped-query attention (num_key_value_heads), SwiGLU MLP
(gate_proj, up_proj, down_proj), model.norm, lm_head.weight or the tied model.embed_tokens.weight.
The safetensors format is parsed by hand (no `safetensors` package either). Computes in float64.

  /usr/bin/python3 tests/hf_reference.py DIR [--out LOGITS.json] [--inputs '[[0,1,2],[3,4,5]]'] [--resave DIR2]

--out writes {"inputs", "shape", "logits"} (default inputs: two rows of block-size-bounded ids derived from the
vocabulary size). --resave writes the weights it loaded as a new HF directory with this script's own
safetensors writer, lm_head.weight included (tied: a copy of wte), so Alpha's reader meets a file it did not
write. Used by tests/train/checkpoint/test_hf.cpp: the committed fixture tests/fixtures/hf_tiny_logits.json
comes from
  ALPHA_WRITE_HF_FIXTURE=$PWD/tests/fixtures/hf_tiny build/tests/test_hf -tc='*fixture*'
  /usr/bin/python3 tests/hf_reference.py tests/fixtures/hf_tiny --out tests/fixtures/hf_tiny_logits.json
(the Llama fixture likewise: ALPHA_WRITE_HF_LLAMA_FIXTURE=$PWD/tests/fixtures/hf_llama_tiny ... -tc='Llama*',
then --out tests/fixtures/hf_llama_tiny_logits.json) and the live ctest test_hf_torch_live runs it on fresh exports (registered only where torch imports).
"""
import argparse
import json
import math
import os
import shutil
import struct

import torch

from safetensors_torch import load_safetensors  # tests/, beside this script




def save_safetensors(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    header["__metadata__"] = metadata
    h = json.dumps(header).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


ACTIVATIONS = {
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
    "gelu": lambda x: torch.nn.functional.gelu(x),
    "relu": torch.relu,
}
ACTIVATIONS["gelu_pytorch_tanh"] = ACTIVATIONS["gelu_new"]


def gpt2_logits(cfg, w, idx):
    assert cfg["model_type"] == "gpt2", cfg["model_type"]
    n_layer, n_head, C = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = ACTIVATIONS[cfg.get("activation_function", "gelu_new")]
    w = {(k[len("transformer.") :] if k.startswith("transformer.") else k): v.double() for k, v in w.items()}
    assert w["wte.weight"].shape == (cfg["vocab_size"], C)
    assert w["wpe.weight"].shape[0] == cfg["n_positions"]
    B, T = idx.shape
    assert T <= cfg["n_positions"]
    x = w["wte.weight"][idx] + w["wpe.weight"][:T]
    D = C // n_head
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(n_layer):
        p = f"h.{l}."
        h = torch.nn.functional.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: (in, out)
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, n_head, D).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = torch.nn.functional.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = act(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = torch.nn.functional.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], eps)
    tied = cfg.get("tie_word_embeddings", True)
    head = w["wte.weight"] if tied or "lm_head.weight" not in w else w["lm_head.weight"]
    return x @ head.T


def rms_norm(x, w, eps):
    # LlamaRMSNorm: x / sqrt(mean(x^2) + eps), times the weight.
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def llama_logits(cfg, w, idx):
    # LlamaForCausalLM (modeling_llama.py): pre-RMSNorm blocks, rotate-half RoPE on q and k, grouped-query
    # attention (repeat_kv), SwiGLU MLP down(silu(gate(x)) * up(x)), final norm, lm_head (or the tied embedding).
    assert cfg["model_type"] == "llama", cfg["model_type"]
    assert cfg.get("hidden_act", "silu") == "silu" and not cfg.get("rope_scaling")
    C, L, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    eps, theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
    w = {k: v.double() for k, v in w.items()}
    B, T = idx.shape
    x = w["model.embed_tokens.weight"][idx]
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()  # (T, D)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(B, T, H, D).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(B, T, Hkv, D).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(B, T, Hkv, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    tied = cfg.get("tie_word_embeddings", False)
    head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return x @ head.T


def logits_of(cfg, w, idx):
    return llama_logits(cfg, w, idx) if cfg["model_type"] == "llama" else gpt2_logits(cfg, w, idx)


def default_inputs(cfg):
    V, T = cfg["vocab_size"], min(cfg.get("n_positions", cfg.get("max_position_embeddings", 8)), 8)
    return [[(7 * i + 3) % V for i in range(T)], [(V - 1 - 5 * i) % V for i in range(T)]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out")
    ap.add_argument("--inputs")
    ap.add_argument("--resave")
    a = ap.parse_args()
    with open(os.path.join(a.dir, "config.json")) as f:
        cfg = json.load(f)
    w, meta = load_safetensors(os.path.join(a.dir, "model.safetensors"))
    inputs = json.loads(a.inputs) if a.inputs else default_inputs(cfg)
    with torch.no_grad():
        logits = logits_of(cfg, w, torch.tensor(inputs))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"inputs": inputs, "shape": list(logits.shape), "logits": [float(v) for v in logits.flatten()]}, f)
        print("wrote", a.out, "shape", list(logits.shape))
    if a.resave:
        os.makedirs(a.resave, exist_ok=True)
        if cfg["model_type"] == "llama":
            full = dict(w)
            if "lm_head.weight" not in full:  # tied: write the head anyway, a copy of the embedding
                full["lm_head.weight"] = full["model.embed_tokens.weight"].clone()
        else:
            full = {(k if k.startswith("transformer.") else "transformer." + k): v for k, v in w.items()}
            full["lm_head.weight"] = full["transformer.wte.weight"].clone()
        save_safetensors(os.path.join(a.resave, "model.safetensors"), full, {"format": "pt"})
        for name in ("config.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
            if os.path.exists(os.path.join(a.dir, name)):
                shutil.copy(os.path.join(a.dir, name), os.path.join(a.resave, name))
        print("resaved", a.resave)


if __name__ == "__main__":
    main()
