#!/usr/bin/python3
"""Golden fixtures for Alpha's parity tests, computed with PyTorch on the CPU.

Run with Debian's torch:   /usr/bin/python3 tests/make_op_fixtures.py
Writes (deterministically, torch.manual_seed):
  tests/fixtures/ops/<op>.json  per-op cases for tests/test_parity.cpp
  tests/fixtures/gpt_tiny.json  model-level golden data for a tiny nanoGPT

Per op case: float32 inputs (stored exactly), an upstream projection R (float32), and the reference output
and input gradients of loss = (out * R).sum(), computed in float64 from those float32 inputs.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPS_DIR = os.path.join(HERE, "fixtures", "ops")
GPT_PATH = os.path.join(HERE, "fixtures", "gpt_tiny.json")


# ---------------------------------------------------------------- compact JSON emission

class F32:
    """float32 values, written as the shortest decimal that reads back (via double) as the same float32."""

    def __init__(self, t):
        self.v = t.detach().to(torch.float32).reshape(-1).numpy()


class F64:
    """float64 reference values, written with `digits` significant digits."""

    def __init__(self, t, digits=10):
        self.v = t.detach().to(torch.float64).reshape(-1).numpy()
        self.digits = digits


def f32_str(x):
    s = str(x)  # numpy: shortest repr that round-trips as float32
    if np.float32(float(s)) != x:  # parsing as double then rounding to float could double-round: be exact
        s = repr(float(x))
    return s


def emit(o):
    if isinstance(o, F32):
        return "[" + ",".join(f32_str(x) for x in o.v) + "]"
    if isinstance(o, F64):
        fmt = "%." + str(o.digits) + "g"
        return "[" + ",".join(fmt % x for x in o.v) + "]"
    if isinstance(o, dict):
        return "{" + ",".join(json.dumps(k) + ":" + emit(v) for k, v in o.items()) + "}"
    if isinstance(o, (list, tuple)):
        return "[" + ",".join(emit(v) for v in o) + "]"
    if isinstance(o, float):
        return repr(o)
    return json.dumps(o)


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = emit(obj)
    json.loads(text)  # sanity: valid JSON
    with open(path, "w") as f:
        f.write(text + "\n")
    return len(text)


# ---------------------------------------------------------------- per-op cases

def randn(*shape):
    return torch.randn(tuple(shape), dtype=torch.float32)


def make_case(name, fn, inputs, params=None):
    """inputs: list of (name, tensor). Float tensors require grad; int tensors are indices (stored as ints).
    fn(*f64_inputs) -> output. Computes the f64 reference of out and of d((out*R).sum())/d input."""
    ref_in = []
    for _, t in inputs:
        if t.dtype.is_floating_point:
            ref_in.append(t.to(torch.float64).requires_grad_(True))
        else:
            ref_in.append(t.to(torch.int64))
    out = fn(*ref_in)
    R = randn(*out.shape)
    (out * R.to(torch.float64)).sum().backward()
    case = {"name": name, "params": params or {}, "inputs": []}
    for (n, t), r in zip(inputs, ref_in):
        e = {"name": n, "shape": list(t.shape)}
        if t.dtype.is_floating_point:
            e.update(dtype="f32", data=F32(t), grad=F64(r.grad))
        else:
            e.update(dtype="i32", data=[int(x) for x in t.reshape(-1).tolist()])
        case["inputs"].append(e)
    case["R"] = {"shape": list(R.shape), "data": F32(R)}
    case["out"] = {"shape": list(out.shape), "data": F64(out)}
    return case


def positive(*shape, lo=0.1):
    return randn(*shape).abs() * 2 + lo


def away_from_zero(*shape):
    x = randn(*shape)
    return torch.where(x >= 0, x + 0.5, x - 0.5)


BCAST = [  # (name, shape a, shape b)
    ("same", (3, 5, 7), (3, 5, 7)),
    ("bcast_last", (3, 5, 17), (17,)),
    ("bcast_both", (3, 1, 17), (1, 5, 1)),
    ("bcast_rank", (4, 1), (2, 1, 7)),
    ("bcast_scalar_like", (1,), (6, 11)),
]


def binary_cases(op, fn):
    cases = []
    for name, sa, sb in BCAST:
        a = randn(*sa)
        b = away_from_zero(*sb) if op == "div" else randn(*sb)
        cases.append(make_case(name, fn, [("a", a), ("b", b)]))
    return cases


def causal_softmax(x):
    Tq, Tk = x.shape[-2], x.shape[-1]
    keep = torch.ones(Tq, Tk, dtype=torch.float64).tril(diagonal=Tk - Tq)
    return x.masked_fill(keep == 0, float("-inf")).softmax(-1)


def big_logits(*shape):
    """Logits around +-1e4: each row sits near +1e4 or -1e4 with a few units of spread; some rows mix both."""
    x = randn(*shape) * 3
    rows = x.reshape(-1, shape[-1])
    n = rows.shape[0]
    for i in range(n):
        if i % 3 == 0:
            rows[i] += 1e4
        elif i % 3 == 1:
            rows[i] -= 1e4
        else:  # mixed: the -1e4 entries underflow to probability 0
            sign = torch.where(torch.arange(shape[-1]) % 2 == 0, 1.0, -1.0)
            rows[i] += 1e4 * sign
    return rows.reshape(*shape)


def ce_targets(n, v, ignored):
    t = torch.randint(0, v, (n,), dtype=torch.int64)
    for i in ignored:
        t[i] = -1
    return t


def op_cases():
    ops = {}
    ops["add"] = binary_cases("add", lambda a, b: a + b)
    ops["sub"] = binary_cases("sub", lambda a, b: a - b)
    ops["mul"] = binary_cases("mul", lambda a, b: a * b)
    ops["div"] = binary_cases("div", lambda a, b: a / b)

    ops["neg"] = [make_case("3d", lambda x: -x, [("x", randn(3, 5, 17))])]
    ops["exp"] = [make_case("3d", lambda x: x.exp(), [("x", randn(3, 5, 17) * 2)]),
                  make_case("1d", lambda x: x.exp(), [("x", randn(33) * 4)])]
    ops["log"] = [make_case("3d", lambda x: x.log(), [("x", positive(3, 5, 17))]),
                  make_case("wide_range", lambda x: x.log(), [("x", torch.exp(randn(41) * 5))])]
    ops["sqrt"] = [make_case("3d", lambda x: x.sqrt(), [("x", positive(3, 5, 17))]),
                   make_case("wide_range", lambda x: x.sqrt(), [("x", torch.exp(randn(41) * 5))])]
    ops["scale"] = [make_case(f"s={s}", lambda x, s=s: x * s, [("x", randn(3, 5, 17))], {"s": s})
                    for s in (-0.37, 2.5)]
    ops["add_scalar"] = [make_case("s=1.75", lambda x: x + 1.75, [("x", randn(3, 5, 17))], {"s": 1.75})]

    for red in ("sum", "mean", "max"):
        cases = []
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                if red == "max":
                    fn = lambda x, d=dim, k=keepdim: x.max(dim=d, keepdim=k).values
                else:
                    fn = lambda x, d=dim, k=keepdim, r=red: getattr(x, r)(dim=d, keepdim=k)
                cases.append(make_case(f"dim={dim},keepdim={int(keepdim)}", fn, [("x", randn(3, 7, 11))],
                                       {"dim": dim, "keepdim": keepdim}))
        # A longer reduction (257 elements) to see how the error grows with length.
        long_fn = (lambda x: x.max(dim=-1).values) if red == "max" else (lambda x, r=red: getattr(x, r)(dim=-1))
        cases.append(make_case("long_row", long_fn, [("x", randn(3, 257))], {"dim": -1, "keepdim": False}))
        ops[red] = cases
    ops["sum_all"] = [make_case("3d", lambda x: x.sum(), [("x", randn(3, 7, 11))])]
    ops["mean_all"] = [make_case("3d", lambda x: x.mean(), [("x", randn(3, 7, 11))])]

    mm = []

    def mm_fn(ta, tb):
        return lambda a, b: (a.transpose(-1, -2) if ta else a) @ (b.transpose(-1, -2) if tb else b)

    def mm_case(name, batch_a, batch_b, M, K, N, ta, tb):
        sa = tuple(batch_a) + ((K, M) if ta else (M, K))
        sb = tuple(batch_b) + ((N, K) if tb else (K, N))
        return make_case(name, mm_fn(ta, tb), [("a", randn(*sa)), ("b", randn(*sb))],
                         {"trans_a": ta, "trans_b": tb})

    for ta in (False, True):
        for tb in (False, True):
            mm.append(mm_case(f"2d,ta={int(ta)},tb={int(tb)}", (), (), 17, 23, 11, ta, tb))
    for ta in (False, True):
        for tb in (False, True):
            mm.append(mm_case(f"batched,ta={int(ta)},tb={int(tb)}", (3,), (3,), 9, 13, 7, ta, tb))
    mm.append(mm_case("weight2d", (2, 9), (), 5, 13, 7, False, False))
    mm.append(mm_case("weight2d,tb=1", (2, 3), (), 5, 13, 7, False, True))
    mm.append(mm_case("weight2d,ta=1", (2,), (), 5, 13, 7, True, False))
    mm.append(mm_case("batch_bcast", (2, 1), (3,), 5, 6, 4, False, False))
    mm.append(mm_case("outer_k1", (), (), 19, 1, 13, False, False))
    mm.append(mm_case("dot_m1n1", (), (), 1, 37, 1, False, False))
    mm.append(mm_case("long_k", (), (), 4, 513, 3, False, False))
    ops["matmul"] = mm

    ops["linear"] = [
        make_case("3d_bias", lambda x, w, b: F.linear(x, w, b),
                  [("x", randn(2, 7, 13)), ("w", randn(11, 13)), ("b", randn(11))]),
        make_case("2d_bias", lambda x, w, b: F.linear(x, w, b),
                  [("x", randn(5, 13)), ("w", randn(11, 13)), ("b", randn(11))]),
    ]

    idx = torch.randint(0, 9, (3, 7))  # ids < 9 of a vocab of 19: repeats, and unused rows get zero grad
    idx[0, :3] = 4
    ops["embedding"] = [
        make_case("repeated", lambda w, i: F.embedding(i, w), [("weight", randn(19, 13)), ("idx", idx)]),
        make_case("1d_idx", lambda w, i: F.embedding(i, w),
                  [("weight", randn(7, 5)), ("idx", torch.tensor([6, 0, 6, 6, 1, 0]))]),
    ]

    ln = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)
    ops["layernorm"] = [
        make_case("3d", ln, [("x", randn(3, 7, 33) * 2 + 0.5), ("w", 1 + 0.1 * randn(33)), ("b", 0.1 * randn(33))],
                  {"eps": 1e-5}),
        make_case("c65", ln, [("x", randn(2, 3, 65) * 0.3 - 1), ("w", 1 + 0.3 * randn(65)), ("b", randn(65))],
                  {"eps": 1e-5}),
    ]

    gelu = lambda x: F.gelu(x, approximate="tanh")
    ops["gelu"] = [
        make_case("3d", gelu, [("x", randn(3, 7, 29) * 3)]),
        make_case("sweep", gelu, [("x", torch.linspace(-12, 12, 97))]),
    ]

    ops["softmax"] = [
        make_case("plain", lambda x: x.softmax(-1), [("x", randn(3, 5, 17) * 3)], {"causal": False}),
        make_case("causal_square", causal_softmax, [("x", randn(2, 3, 7, 7) * 2)], {"causal": True}),
        make_case("causal_tq<tk", causal_softmax, [("x", randn(2, 5, 9) * 2)], {"causal": True}),
        make_case("big_logits", lambda x: x.softmax(-1), [("x", big_logits(6, 13))], {"causal": False}),
        make_case("big_logits_causal", causal_softmax, [("x", big_logits(2, 6, 6))], {"causal": True}),
    ]

    ce = lambda x, t: F.cross_entropy(x, t, ignore_index=-1, reduction="mean")
    ops["cross_entropy"] = [
        make_case("plain", ce, [("logits", randn(23, 17) * 2), ("targets", ce_targets(23, 17, [2, 9, 10, 22]))],
                  {"ignore_index": -1}),
        make_case("vocab65", ce, [("logits", randn(9, 65)), ("targets", ce_targets(9, 65, []))],
                  {"ignore_index": -1}),
        make_case("big_logits", ce, [("logits", big_logits(9, 11)), ("targets", ce_targets(9, 11, [4]))],
                  {"ignore_index": -1}),
    ]
    # dropout: excluded (Alpha's Philox mask differs from torch's RNG by design).
    return ops


# ---------------------------------------------------------------- tiny nanoGPT

class Cfg:
    n_layer, n_head, n_embd, block_size, vocab_size = 2, 2, 32, 16, 65


class Attn(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = torch.nn.Linear(c.n_embd, 3 * c.n_embd, bias=True)
        self.c_proj = torch.nn.Linear(c.n_embd, c.n_embd, bias=True)
        self.n_head, self.n_embd = c.n_head, c.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = torch.nn.Linear(c.n_embd, 4 * c.n_embd, bias=True)
        self.c_proj = torch.nn.Linear(4 * c.n_embd, c.n_embd, bias=True)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(c.n_embd, eps=1e-5)
        self.attn = Attn(c)
        self.ln_2 = torch.nn.LayerNorm(c.n_embd, eps=1e-5)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(c.vocab_size, c.n_embd),
            wpe=torch.nn.Embedding(c.block_size, c.n_embd),
            h=torch.nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=torch.nn.LayerNorm(c.n_embd, eps=1e-5),
        ))
        self.lm_head = torch.nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))
        # nanoGPT zero-inits biases and LayerNorm is (1, 0); perturb them so they matter in the test.
        with torch.no_grad():
            for pn, p in self.named_parameters():
                if pn.endswith(".bias"):
                    p.add_(0.02 * torch.randn_like(p))
                elif p.dim() == 1:  # LayerNorm weights
                    p.add_(0.05 * torch.randn_like(p))

    def _init_weights(self, m):
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                torch.nn.init.zeros_(m.bias)
        elif isinstance(m, torch.nn.Embedding):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    # nanoGPT train.py
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def configure_optimizers(model, weight_decay, learning_rate, betas, eps):
    # nanoGPT model.py: decay 2-D+ params (matmul weights, embeddings), not biases / LayerNorm weights.
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": nodecay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, eps=eps, foreach=False)


def gpt_fixture():
    c = Cfg()
    B, T, steps = 2, 16, 3
    opt_cfg = dict(learning_rate=1e-3, min_lr=1e-4, warmup_iters=1, lr_decay_iters=3, beta1=0.9, beta2=0.99,
                   eps=1e-8, weight_decay=0.1, grad_clip=1.0)
    torch.manual_seed(1337)
    model = GPT(c)
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    batches = []
    for _ in range(steps):
        seq = torch.randint(0, c.vocab_size, (B, T + 1))  # targets = next token, like nanoGPT's get_batch
        batches.append((seq[:, :T].contiguous(), seq[:, 1:].contiguous()))

    # f64 reference at the initial parameters on batch 0.
    m64 = GPT(c).double()
    m64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    logits64, loss64 = m64(*batches[0])
    loss64.backward()
    grads64 = {n: p.grad for n, p in m64.named_parameters()}

    # f32 training: forward, backward, clip, AdamW, with nanoGPT's cosine lr, a new batch each step.
    opt = configure_optimizers(model, opt_cfg["weight_decay"], opt_cfg["learning_rate"],
                               (opt_cfg["beta1"], opt_cfg["beta2"]), opt_cfg["eps"])
    lrs, losses, norms = [], [], []
    logits32 = loss32 = None
    for it in range(steps):
        lr = get_lr(it, opt_cfg["learning_rate"], opt_cfg["min_lr"], opt_cfg["warmup_iters"],
                    opt_cfg["lr_decay_iters"])
        for g in opt.param_groups:
            g["lr"] = lr
        logits, loss = model(*batches[it])
        if it == 0:
            logits32, loss32 = logits.detach().clone(), loss.item()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opt_cfg["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        lrs.append(lr)
        losses.append(loss.item())
        norms.append(norm.item())

    names = [n for n, _ in model.named_parameters()]
    out = {
        "config": {"n_layer": c.n_layer, "n_head": c.n_head, "n_embd": c.n_embd, "block_size": c.block_size,
                   "vocab_size": c.vocab_size, "bias": True, "dropout": 0.0, "tied_lm_head": True,
                   "gelu": "tanh", "layernorm_eps": 1e-5},
        "optimizer": dict(opt_cfg, steps=steps,
                          note="AdamW (torch, decoupled weight decay) with two groups: weight_decay on params "
                               "with dim >= 2, 0 on the rest; clip_grad_norm_(1.0) over all params before "
                               "each step; lr(it) = nanoGPT get_lr"),
        "param_names": names,
        "params": {n: {"shape": list(init[n].shape), "data": F32(init[n])} for n in names},
        "batches": [{"idx": [int(x) for x in i.reshape(-1).tolist()],
                     "targets": [int(x) for x in t.reshape(-1).tolist()], "shape": [B, T]} for i, t in batches],
        "ref64": {"note": "same model in float64 from the f32 initial params, batch 0",
                  "logits_shape": list(logits64.shape), "logits": F64(logits64, 10), "loss": loss64.item(),
                  "grads": {n: F64(grads64[n], 9) for n in names}},
        "torch32": {"note": "torch float32 on batch 0 (for context; compare against ref64)",
                    "logits": F64(logits32, 9), "loss": loss32},
        "train32": {"note": "float32 torch training; loss/grad norm (pre-clip) per step, params after all steps",
                    "lr": lrs, "loss": losses, "grad_norm": norms,
                    "params_after": {n: F32(p) for n, p in model.named_parameters()}},
    }
    return out


def main():
    torch.manual_seed(0)
    total = 0
    for op, cases in op_cases().items():
        n = write(os.path.join(OPS_DIR, op + ".json"), {"op": op, "cases": cases})
        total += n
        print(f"ops/{op}.json: {len(cases)} cases, {n} bytes")
    print(f"ops total: {total} bytes")
    n = write(GPT_PATH, gpt_fixture())
    print(f"gpt_tiny.json: {n} bytes")


if __name__ == "__main__":
    main()
