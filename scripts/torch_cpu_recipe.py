"""PyTorch peer for Alpha's CPU recipe (configs/shakespeare_char_cpu.json): nanoGPT's shakespeare_char CPU run
(4 layers, 4 heads, n_embd 128, block 64, batch 12, 2000 steps, lr 1e-3 cosine to 1e-4, warmup 100, beta2 0.99,
dropout 0, weight decay 0.1 on 2-D params, clip 1.0, eval_iters 20), written independently of nanoGPT.

Usage: [EVAL_ITERS=20] [EVAL_INTERVAL=250] [SEED=1337] [THREADS=2] [GELU=tanh|none] [FULL_EVAL=1] /usr/bin/python3 scripts/torch_cpu_recipe.py DATA.txt [max_steps]
Prints one JSON line per evaluation and a final {"done": ...} line with wall seconds and ms/step. FULL_EVAL=1 adds
"full_val": the mean loss over every consecutive non-overlapping (T+1)-token window of the val split, the same
windows `alpha eval CHECKPOINT` uses (no sampling noise).
"""
import json, math, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

L, H, C, T, B = 4, 4, 128, 64, 12
LR, MIN_LR, WARMUP = 1e-3, 1e-4, 100
EVAL_INTERVAL = int(os.environ.get("EVAL_INTERVAL", 250))  # the recipe's values; raise EVAL_ITERS to cut eval noise
EVAL_ITERS = int(os.environ.get("EVAL_ITERS", 20))
SEED = int(os.environ.get("SEED", 1337))
THREADS = int(os.environ.get("THREADS", 2))
GELU = os.environ.get("GELU", "tanh")  # "none" = exact erf GELU, as nanoGPT's nn.GELU()
FULL_EVAL = os.environ.get("FULL_EVAL", "0") == "1"


class LayerNorm(nn.Module):
    """LayerNorm without bias (bias=False in the recipe; torch 1.13's nn.LayerNorm always has one)."""
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return F.layer_norm(x, (C,), self.weight, None, 1e-5)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = LayerNorm(), LayerNorm()
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C, bias=False), nn.Linear(C, C, bias=False)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C, bias=False), nn.Linear(4 * C, C, bias=False)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).tril())

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate=GELU))


class GPT(nn.Module):
    def __init__(self, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = LayerNorm()
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith("c_proj.weight") or n.endswith("mlp_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.h:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))


def main():
    path, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    torch.manual_seed(SEED)
    torch.set_num_threads(THREADS)
    text = open(path, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    m = GPT(len(chars))
    decay = [p for p in m.parameters() if p.dim() >= 2]
    nodecay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.99))

    def batch(d):
        ix = torch.randint(len(d) - T, (B,))
        return torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + T + 1] for i in ix])

    def lr_at(it):
        if it < WARMUP:
            return LR * (it + 1) / (WARMUP + 1)
        if it > steps:
            return MIN_LR
        r = (it - WARMUP) / (steps - WARMUP)
        return MIN_LR + 0.5 * (1 + math.cos(math.pi * r)) * (LR - MIN_LR)

    @torch.no_grad()
    def evaluate():
        m.eval()
        out = {k: sum(m(*batch(d)).item() for _ in range(EVAL_ITERS)) / EVAL_ITERS for k, d in (("train", train), ("val", val))}
        m.train()
        return out

    @torch.no_grad()
    def full_val():
        m.eval()
        w = val[: (len(val) // (T + 1)) * (T + 1)].view(-1, T + 1)
        total = sum(m(c[:, :-1].contiguous(), c[:, 1:].contiguous()).item() * len(c) for c in w.split(B))
        m.train()
        return total / len(w)

    t0 = time.perf_counter()
    train_s, step_ms = 0.0, []
    for it in range(steps):
        ts = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        loss = m(*batch(train))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        train_s += time.perf_counter() - ts
        step_ms.append((time.perf_counter() - ts) * 1e3)
        if (it + 1) % EVAL_INTERVAL == 0 or it + 1 == steps:
            print(json.dumps(dict(step=it + 1, **evaluate(), s=round(time.perf_counter() - t0, 1))), flush=True)
    extra = dict(full_val=round(full_val(), 6)) if FULL_EVAL else {}
    print(json.dumps(dict(done=True, seed=SEED, **extra, gelu=GELU, torch=torch.__version__, seconds=round(time.perf_counter() - t0, 1),
                          ms_per_step=round(train_s / steps * 1e3, 1),
                          median_step_ms=round(sorted(step_ms)[steps // 2], 2))), flush=True)


if __name__ == "__main__":
    main()
