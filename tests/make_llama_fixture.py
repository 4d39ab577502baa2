#!/usr/bin/python3
"""Golden fixture for Alpha's tiny Llama (tests/train/model/test_llama.cpp), computed with PyTorch on the CPU.

Run with Debian's torch:   /usr/bin/python3 tests/make_llama_fixture.py
Writes (deterministically, torch.manual_seed) tests/fixtures/llama_tiny.json: for each model variant its config,
float32 parameters under Hugging Face LlamaForCausalLM names (stored exactly), one batch, and the float64
reference logits, mean cross-entropy loss and every parameter gradient. The model below is written from the
Hugging Face Llama definitions (rotate-half RoPE, repeat_kv for grouped-query attention, RMSNorm, SwiGLU;
Qwen3-style q_norm/k_norm per head before RoPE), independently of Alpha's code.
"""
import math
import os

import torch
import torch.nn.functional as F

from make_op_fixtures import F32, F64, write

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "llama_tiny.json")

VARIANTS = [
    # name, config (Alpha's model.* keys)
    ("swiglu_gqa_qknorm_untied", dict(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, block_size=16, vocab_size=65,
                                      mlp_act="swiglu", mlp_hidden=0, qk_norm=True, tie_embeddings=False,
                                      rope_base=10000.0)),
    ("relu2_tied", dict(n_layer=1, n_head=2, n_kv_head=2, n_embd=24, block_size=16, vocab_size=65, mlp_act="relu2",
                        mlp_hidden=40, qk_norm=False, tie_embeddings=True, rope_base=500.0)),
]
EPS = 1e-5


def mlp_width(c):
    if c["mlp_hidden"] > 0:
        return c["mlp_hidden"]
    return 4 * c["n_embd"] if c["mlp_act"] == "relu2" else (8 * c["n_embd"] // 3 + 63) // 64 * 64


def make_params(c):
    C, V, H, Hkv = c["n_embd"], c["vocab_size"], c["n_head"], c["n_kv_head"]
    D, Fw = C // H, mlp_width(c)
    p = {"model.embed_tokens.weight": torch.randn(V, C) * 0.3}

    def norm(n):
        return 1.0 + 0.2 * torch.randn(n)

    for i in range(c["n_layer"]):
        pre = f"model.layers.{i}."
        p[pre + "input_layernorm.weight"] = norm(C)
        p[pre + "self_attn.q_proj.weight"] = torch.randn(H * D, C) * 0.2
        p[pre + "self_attn.k_proj.weight"] = torch.randn(Hkv * D, C) * 0.2
        p[pre + "self_attn.v_proj.weight"] = torch.randn(Hkv * D, C) * 0.2
        p[pre + "self_attn.o_proj.weight"] = torch.randn(C, H * D) * 0.2
        if c["qk_norm"]:
            p[pre + "self_attn.q_norm.weight"] = norm(D)
            p[pre + "self_attn.k_norm.weight"] = norm(D)
        p[pre + "post_attention_layernorm.weight"] = norm(C)
        if c["mlp_act"] == "swiglu":
            p[pre + "mlp.gate_proj.weight"] = torch.randn(Fw, C) * 0.2
        p[pre + "mlp.up_proj.weight"] = torch.randn(Fw, C) * 0.2
        p[pre + "mlp.down_proj.weight"] = torch.randn(C, Fw) * 0.2
    p["model.norm.weight"] = norm(C)
    if not c["tie_embeddings"]:
        p["lm_head.weight"] = torch.randn(V, C) * 0.3
    return p


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(p, c, idx):
    B, T = idx.shape
    C, H, Hkv = c["n_embd"], c["n_head"], c["n_kv_head"]
    D = C // H
    inv_freq = 1.0 / (c["rope_base"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]  # (1, 1, T, D)
    x = p["model.embed_tokens.weight"][idx]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(c["n_layer"]):
        pre = f"model.layers.{i}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"])
        q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, H, D)
        k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, Hkv, D)
        v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, Hkv, D)
        if c["qk_norm"]:
            q = rms_norm(q, p[pre + "self_attn.q_norm.weight"])
            k = rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = H // Hkv
        k = k[:, :, None].expand(B, Hkv, rep, T, D).reshape(B, H, T, D)
        v = v[:, :, None].expand(B, Hkv, rep, T, D).reshape(B, H, T, D)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"])
        up = h @ p[pre + "mlp.up_proj.weight"].T
        if c["mlp_act"] == "swiglu":
            m = F.silu(h @ p[pre + "mlp.gate_proj.weight"].T) * up
        else:
            m = torch.relu(up).square()
        x = x + m @ p[pre + "mlp.down_proj.weight"].T
    x = rms_norm(x, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if c["tie_embeddings"] else p["lm_head.weight"]
    return x @ head.T


def variant(name, c):
    init = make_params(c)  # float32
    B, T, V = 2, c["block_size"], c["vocab_size"]
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))
    p64 = {n: t.to(torch.float64).requires_grad_(True) for n, t in init.items()}
    logits = forward(p64, c, idx)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
    loss.backward()
    names = list(init.keys())
    return {
        "name": name,
        "config": c,
        "param_names": names,
        "params": {n: {"shape": list(init[n].shape), "data": F32(init[n])} for n in names},
        "batch": {"idx": idx.reshape(-1).tolist(), "targets": tgt.reshape(-1).tolist(), "shape": [B, T]},
        "ref64": {"logits": F64(logits, 10), "loss": loss.item(), "grads": {n: F64(p64[n].grad, 9) for n in names}},
    }


def main():
    torch.manual_seed(0)
    n = write(OUT, {"variants": [variant(name, c) for name, c in VARIANTS]})
    print(f"llama_tiny.json: {n} bytes")


if __name__ == "__main__":
    main()
