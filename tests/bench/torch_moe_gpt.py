#!/usr/bin/python3
"""torch_moe_gpt.py — the peer of bench_train: moe-gpt written as idiomatic eager PyTorch.

The same architecture as engine/model (token + learned position embeddings; pre-LayerNorm blocks of
causal multi-head self-attention and a dropless top-k MoE feed-forward whose combine weight is the
un-renormalised gate probability; the Switch balancing loss; final LayerNorm; LM head tied to the
token embedding), the same initialisation rules, and the same optimizer (AdamW with betas 0.9/0.95,
decay on weight matrices only, global-norm clipping at 1.0, linear warmup then cosine). The MoE
sorts the token-to-expert assignments by expert, runs one matmul pair per expert on its contiguous
rows and index_adds the weighted results back — no padding, no capacity factor.

Each step draws a fresh batch of random windows of the byte corpus, runs forward, loss = ce + aux,
backward, clip, AdamW, scheduler. Only the --steps timed steps (after --warmup untimed ones) are
timed. Prints one JSON line: tokens_per_s, ms_per_step, first_loss (the very first step, warmup
included), last_loss, params. Run it with Debian's PyTorch: /usr/bin/python3 torch_moe_gpt.py ...
"""
import argparse
import ctypes
import json
import math
import os
import stat
import sys
import time

# Debian's torch runs its ops on OpenMP and its GEMMs on OpenBLAS's own pthreads; with OpenMP's
# default spin-waiting the two pools fight over the cores (measured on 2 cores: 2 threads ran 3-4x
# slower than 1). Passive waiting gives the peer its best figures, so it is the default here.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402  (after the OpenMP setting, which is read when the runtime starts)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

INIT_STD = 0.02        # GPT-2's initialisation, as engine/model/params.cpp
LN_EPS = 1e-5          # kernels/cpu/norm.h kLayerNormEps
BETAS = (0.9, 0.95)    # engine/model/optimizer.h OptimConfig
ADAM_EPS = 1e-8
WEIGHT_DECAY = 0.1
CLIP_NORM = 1.0
MIN_LR_RATIO = 0.1
AUX_WEIGHT = 0.01
VOCAB = 256


class Attention(nn.Module):
    """Causal multi-head self-attention: one packed qkv projection, one output projection."""

    def __init__(self, d, heads, proj_std):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        nn.init.normal_(self.qkv.weight, std=INIT_STD)
        nn.init.normal_(self.out.weight, std=proj_std)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.out.bias)

    def forward(self, x, mask):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, hs).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        scores = scores.masked_fill(mask[:T, :T], float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(B, T, C))


class Expert(nn.Module):
    """d -> 4d -> d MLP with biases and tanh-approximated GELU."""

    def __init__(self, d, proj_std):
        super().__init__()
        self.w1 = nn.Linear(d, 4 * d)
        self.w2 = nn.Linear(4 * d, d)
        nn.init.normal_(self.w1.weight, std=INIT_STD)
        nn.init.normal_(self.w2.weight, std=proj_std)
        nn.init.zeros_(self.w1.bias)
        nn.init.zeros_(self.w2.bias)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


class MoE(nn.Module):
    """Softmax gate over E experts, top-k, dropless; returns (output, Switch balancing loss)."""

    def __init__(self, d, experts, top_k, proj_std):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(d, experts, bias=False)
        nn.init.normal_(self.gate.weight, std=INIT_STD)
        self.experts = nn.ModuleList(Expert(d, proj_std) for _ in range(experts))

    def balancing_loss(self, probs, idx):
        E = len(self.experts)
        counts = torch.bincount(idx.reshape(-1), minlength=E).to(probs.dtype)
        f = counts / (self.top_k * probs.shape[0])
        return AUX_WEIGHT * E * torch.sum(f * probs.mean(dim=0))

    def forward(self, x):
        N, D = x.shape
        probs = F.softmax(self.gate(x), dim=-1)
        weights, idx = torch.topk(probs, self.top_k, dim=-1)
        flat = idx.reshape(-1)
        order = torch.argsort(flat)
        token = order // self.top_k                       # source token of each sorted assignment
        rows = x[token]
        sizes = torch.bincount(flat, minlength=len(self.experts)).tolist()
        outs = [self.experts[e](chunk) for e, chunk in enumerate(rows.split(sizes)) if sizes[e] > 0]
        y = torch.cat(outs) * weights.reshape(-1)[order].unsqueeze(1)
        out = torch.zeros_like(x).index_add(0, token, y)
        return out, self.balancing_loss(probs, idx)


class Block(nn.Module):
    def __init__(self, d, heads, experts, top_k, proj_std):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=LN_EPS)
        self.attn = Attention(d, heads, proj_std)
        self.ln2 = nn.LayerNorm(d, eps=LN_EPS)
        self.moe = MoE(d, experts, top_k, proj_std)

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        B, T, C = x.shape
        y, aux = self.moe(self.ln2(x).reshape(B * T, C))
        return x + y.view(B, T, C), aux


class MoeGpt(nn.Module):
    def __init__(self, layers, d, heads, experts, top_k, seq, vocab=VOCAB):
        super().__init__()
        proj_std = INIT_STD / math.sqrt(2 * layers)
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        nn.init.normal_(self.tok.weight, std=INIT_STD)
        nn.init.normal_(self.pos.weight, std=INIT_STD)
        self.blocks = nn.ModuleList(Block(d, heads, experts, top_k, proj_std) for _ in range(layers))
        self.lnf = nn.LayerNorm(d, eps=LN_EPS)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1))

    def logits(self, inputs):
        """The logits [B, T, vocab] of every position, and the balancing loss summed over layers."""
        B, T = inputs.shape
        x = self.tok(inputs) + self.pos(torch.arange(T))
        aux = x.new_zeros(())
        for block in self.blocks:
            x, a = block(x, self.mask)
            aux = aux + a
        return self.lnf(x) @ self.tok.weight.t(), aux

    def forward(self, inputs, targets):
        B, T = inputs.shape
        logits, aux = self.logits(inputs)
        ce = F.cross_entropy(logits.view(B * T, self.vocab), targets.reshape(-1))
        return ce, aux


def param_groups(model):
    """AdamW groups: decay on the weight matrices (attention, gate, experts, token embedding) only."""
    decay, plain = [], []
    for name, p in model.named_parameters():
        is_matrix = name.endswith(".weight") and p.dim() == 2 and not name.startswith("pos.")
        (decay if is_matrix else plain).append(p)
    return [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": plain, "weight_decay": 0.0}]


def lr_factor(step, warmup, total):
    """engine/model/optimizer.cpp learning_rate(), as a multiple of the base rate."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    return MIN_LR_RATIO + 0.5 * (1.0 - MIN_LR_RATIO) * (1.0 + math.cos(math.pi * progress))


def pin_threads(n):
    """n intra-op threads, one inter-op thread, and n OpenBLAS threads: Debian's torch calls the system
    OpenBLAS (BLAS_INFO=generic), which ignores torch.set_num_threads and starts one thread per core."""
    torch.set_num_threads(n)
    torch.set_num_interop_threads(1)
    try:
        ctypes.CDLL("libblas.so.3").openblas_set_num_threads(n)
    except (OSError, AttributeError):
        pass  # not OpenBLAS: torch's own setting is the only one


def load_corpus(path):
    """A file's bytes, or a directory's regular non-symlink text files (no NUL) in name order."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return f.read()
    parts = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        st = os.lstat(full)
        if name.startswith(".") or not stat.S_ISREG(st.st_mode):
            continue
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" not in data:
            parts.append(data)
    return b"".join(parts)


def random_batch(corpus, batch, seq, gen):
    starts = torch.randint(0, corpus.numel() - seq, (batch,), generator=gen)
    windows = torch.stack([corpus[s:s + seq + 1] for s in starts.tolist()]).long()
    return windows[:, :-1], windows[:, 1:]


def train_step(model, opt, sched, corpus, args, gen):
    inputs, targets = random_batch(corpus, args.batch, args.seq, gen)
    ce, aux = model(inputs, targets)
    loss = ce + aux
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
    opt.step()
    sched.step()
    return loss.item()


def measure(model, groups, corpus, args):
    """args.warmup untimed then args.steps timed training steps of `model` (AdamW over `groups`, the
    engine's schedule); prints the JSON line bench_train reads. torch_moe_llama.py measures with it too."""
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=BETAS, eps=ADAM_EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, args.lr_warmup, args.lr_total))
    gen = torch.Generator().manual_seed(args.seed)
    losses = [train_step(model, opt, sched, corpus, args, gen) for _ in range(args.warmup)]
    t0 = time.perf_counter()
    losses += [train_step(model, opt, sched, corpus, args, gen) for _ in range(args.steps)]
    elapsed = time.perf_counter() - t0
    print(json.dumps({
        "tokens_per_s": args.batch * args.seq * args.steps / elapsed,
        "ms_per_step": 1e3 * elapsed / args.steps,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "params": sum(p.numel() for p in model.parameters()),
    }))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in [("layers", 2), ("d", 64), ("heads", 4), ("experts", 8), ("top-k", 2), ("seq", 64),
                          ("batch", 16), ("threads", 1), ("steps", 20), ("warmup", 3), ("seed", 1),
                          ("lr-warmup", 20), ("lr-total", 200)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    return p.parse_args()


def main():
    args = parse_args()
    pin_threads(args.threads)
    torch.manual_seed(args.seed)
    corpus = torch.tensor(list(load_corpus(args.data)), dtype=torch.uint8)
    if corpus.numel() < args.seq + 1:
        sys.exit(f"{args.data}: {corpus.numel()} bytes, fewer than seq + 1 = {args.seq + 1}")
    model = MoeGpt(args.layers, args.d, args.heads, args.experts, args.top_k, args.seq)
    measure(model, param_groups(model), corpus, args)


if __name__ == "__main__":
    main()
