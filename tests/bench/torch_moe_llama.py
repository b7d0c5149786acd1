#!/usr/bin/python3
"""torch_moe_llama.py — the peer of bench_train --config llama: moe-llama written as idiomatic eager PyTorch.

The architecture of engine/model/moe_llama.h: token embedding, pre-RMSNorm blocks of causal
self-attention with rotary positions (rotate half) and grouped-query attention (repeat_kv), an MoE of
SwiGLU experts with a softmax or sigmoid router, top-k (renormalised or not), optional shared experts,
the Switch balancing loss and the router z-loss, a final RMSNorm and a tied or untied head. The same
training step as torch_moe_gpt.py (its helpers: batches, schedule, clipping, AdamW, thread pinning),
printing the same JSON line. Run it with Debian's PyTorch: /usr/bin/python3 torch_moe_llama.py ...
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import torch_moe_gpt as gpt  # noqa: E402  (sets the OpenMP policy before torch starts)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

RMS_EPS = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, d, heads, kv_heads, theta, seq, proj_std):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        for m in (self.q, self.k, self.v):
            nn.init.normal_(m.weight, std=gpt.INIT_STD)
        nn.init.normal_(self.o.weight, std=proj_std)
        inv = theta ** (-torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd)
        ang = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos().float())
        self.register_buffer("sin", emb.sin().float())

    def forward(self, x, mask):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        cos, sin = self.cos[:T], self.sin[:T]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        scores = scores.masked_fill(mask[:T, :T], float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, d, ffn, proj_std):
        super().__init__()
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)
        nn.init.normal_(self.gate.weight, std=gpt.INIT_STD)
        nn.init.normal_(self.up.weight, std=gpt.INIT_STD)
        nn.init.normal_(self.down.weight, std=proj_std)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Router over E SwiGLU experts, top-k, dropless; returns (output, balancing loss + z-loss)."""

    def __init__(self, a, proj_std):
        super().__init__()
        self.a = a
        self.router = nn.Linear(a.d, a.experts, bias=False)
        nn.init.normal_(self.router.weight, std=gpt.INIT_STD)
        self.experts = nn.ModuleList(SwiGLU(a.d, a.ffn, proj_std) for _ in range(a.experts))
        self.shared = SwiGLU(a.d, a.ffn * a.shared, proj_std) if a.shared else None

    def forward(self, x):
        a, E = self.a, len(self.experts)
        logits = self.router(x)
        scores = torch.sigmoid(logits) if a.router == "sigmoid" else F.softmax(logits, dim=-1)
        chosen, idx = torch.topk(scores, a.top_k, dim=-1)
        weights = chosen / chosen.sum(-1, keepdim=True) if a.norm_topk else chosen
        flat = idx.reshape(-1)
        order = torch.argsort(flat)
        token = order // a.top_k
        sizes = torch.bincount(flat, minlength=E).tolist()
        outs = [self.experts[e](chunk) for e, chunk in enumerate(x[token].split(sizes)) if sizes[e] > 0]
        y = torch.cat(outs) * weights.reshape(-1)[order].unsqueeze(1)
        out = torch.zeros_like(x).index_add(0, token, y)
        if self.shared is not None:
            out = out + self.shared(x)
        probs = scores / scores.sum(-1, keepdim=True) if a.router == "sigmoid" else scores
        f = torch.bincount(flat, minlength=E).to(x.dtype) / (a.top_k * x.shape[0])
        aux = gpt.AUX_WEIGHT * E * torch.sum(f * probs.mean(dim=0))
        z = a.z_loss * torch.logsumexp(logits, dim=-1).pow(2).mean()
        return out, aux + z


class Block(nn.Module):
    def __init__(self, a, proj_std):
        super().__init__()
        self.n1, self.n2 = RMSNorm(a.d), RMSNorm(a.d)
        self.attn = Attention(a.d, a.heads, a.kv_heads, a.rope_theta, a.seq, proj_std)
        self.moe = MoE(a, proj_std)

    def forward(self, x, mask):
        x = x + self.attn(self.n1(x), mask)
        B, T, C = x.shape
        y, aux = self.moe(self.n2(x).reshape(B * T, C))
        return x + y.view(B, T, C), aux


class MoeLlama(nn.Module):
    def __init__(self, a):
        super().__init__()
        proj_std = gpt.INIT_STD / math.sqrt(2 * a.layers)
        self.vocab = gpt.VOCAB
        self.tok = nn.Embedding(gpt.VOCAB, a.d)
        nn.init.normal_(self.tok.weight, std=gpt.INIT_STD)
        self.blocks = nn.ModuleList(Block(a, proj_std) for _ in range(a.layers))
        self.norm = RMSNorm(a.d)
        self.head = None if a.tied else nn.Linear(a.d, gpt.VOCAB, bias=False)
        if self.head is not None:
            nn.init.normal_(self.head.weight, std=gpt.INIT_STD)
        self.register_buffer("mask", torch.triu(torch.ones(a.seq, a.seq, dtype=torch.bool), diagonal=1))

    def forward(self, inputs, targets):
        B, T = inputs.shape
        x = self.tok(inputs)
        aux = x.new_zeros(())
        for block in self.blocks:
            x, extra = block(x, self.mask)
            aux = aux + extra
        h = self.norm(x)
        logits = h @ self.tok.weight.t() if self.head is None else self.head(h)
        return F.cross_entropy(logits.view(B * T, self.vocab), targets.reshape(-1)), aux


def param_groups(model):
    """AdamW groups: decay on the matrices (attention, router, experts, embedding, head) only."""
    decay, plain = [], []
    for p in model.parameters():
        (decay if p.dim() == 2 else plain).append(p)
    return [{"params": decay, "weight_decay": gpt.WEIGHT_DECAY}, {"params": plain, "weight_decay": 0.0}]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in [("layers", 4), ("d", 128), ("heads", 8), ("kv-heads", 2), ("experts", 16), ("top-k", 4),
                          ("ffn", 128), ("shared", 1), ("seq", 128), ("batch", 16), ("threads", 1), ("steps", 20),
                          ("warmup", 3), ("seed", 1), ("lr-warmup", 20), ("lr-total", 200), ("rope-theta", 10000)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--router", choices=["softmax", "sigmoid"], default="sigmoid")
    p.add_argument("--norm-topk", action="store_true")
    p.add_argument("--tied", action="store_true")
    p.add_argument("--z-loss", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    return p.parse_args()


def main():
    a = parse_args()
    gpt.pin_threads(a.threads)
    torch.manual_seed(a.seed)
    corpus = torch.tensor(list(gpt.load_corpus(a.data)), dtype=torch.uint8)
    if corpus.numel() < a.seq + 1:
        sys.exit(f"{a.data}: {corpus.numel()} bytes, fewer than seq + 1 = {a.seq + 1}")
    model = MoeLlama(a)
    gpt.measure(model, param_groups(model), corpus, a)


if __name__ == "__main__":
    main()
