#!/usr/bin/env python3
"""torch_moe_layer.py — the PyTorch peer of bench_moe_gpu: one MoE feed-forward layer, forward and
backward, on one GPU, in bf16 with fp32 accumulation (PyTorch's default for bf16 matmuls).

The layer is the one engine/model runs: a gate GEMM x Wg [d, E] and a softmax over the E experts;
each token goes to k experts, each expert a d -> 4d -> d MLP with biases and tanh-GELU; the outputs
are combined with the (un-renormalised) gate probabilities; dropless, no capacity factor. Routing
is forced, as bench_moe_gpu forces it, so both sides see the same expert loads: with skew s, the
first max(1, E/4) experts get s times the assignments of each other expert (s = 1: balanced). The
N*k assignments are dealt expert by expert in that order, and token t's j-th choice is assignment
j*N + t (so the k choices of a token are distinct). Two implementations are timed:

  loop     sort the assignments by expert, one matmul pair per expert on its contiguous rows,
           index_add the weighted results back (what idiomatic eager PyTorch MoE code does);
  grouped  the same permutation, with torch._grouped_mm for the expert GEMMs (one launch per
           GEMM for all experts; needs PyTorch >= 2.8 and sm_90).

Timing: CUDA events around `iters` forward+backward passes after `warmup` untimed ones. FLOPs
counted are the expert GEMMs only: 2 * tokens * k * (d*4d + 4d*d) forward, twice that backward.
Prints a table, and with --json FILE one JSON object per configuration and implementation.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

SIZES = {"GPT-S": (768, 8), "GPT-M": (1024, 12), "GPT-L": (1024, 16)}  # Lazarus Table 1: (d, E)


def expert_counts(tokens, k, experts, skew):
    """Assignments per expert: the hot quarter get `skew` parts, the others 1; remainder to the first."""
    hot = max(1, experts // 4)
    weights = [skew if e < hot else 1.0 for e in range(experts)]
    total = tokens * k
    counts = [int(total * w / sum(weights)) for w in weights]
    for e in range(total - sum(counts)):
        counts[e % experts] += 1
    return counts


def forced_routing(tokens, k, experts, skew, device):
    """idx [tokens, k]: distinct experts per token, expert loads as expert_counts()."""
    counts = expert_counts(tokens, k, experts, skew)
    # Deal the assignments expert by expert into k columns, column-major: assignment a goes to
    # token a % tokens, choice a // tokens. An expert's run of assignments is shorter than
    # `tokens` (its count <= tokens because skew keeps it below the whole), so one token never
    # gets the same expert twice.
    flat = torch.repeat_interleave(torch.arange(experts), torch.tensor(counts))
    if max(counts) > tokens:
        raise ValueError(f"skew {skew}: an expert would get {max(counts)} of {tokens} tokens twice over (k distinct)")
    return flat.view(k, tokens).t().contiguous().to(device)


class MoeLayer(torch.nn.Module):
    def __init__(self, d, experts, device):
        super().__init__()
        bf = dict(device=device, dtype=torch.bfloat16)
        self.wg = torch.nn.Parameter(torch.randn(d, experts, **bf) * 0.02)
        self.w1 = torch.nn.Parameter(torch.randn(experts, d, 4 * d, **bf) * 0.02)
        self.b1 = torch.nn.Parameter(torch.zeros(experts, 4 * d, **bf))
        self.w2 = torch.nn.Parameter(torch.randn(experts, 4 * d, d, **bf) * 0.02)
        self.b2 = torch.nn.Parameter(torch.zeros(experts, d, **bf))

    def route(self, x, idx):
        probs = torch.softmax((x @ self.wg).float(), dim=-1)
        w = probs.gather(1, idx).to(x.dtype)                      # combine weights [N, k]
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        rows = order // idx.shape[1]                              # token of each sorted assignment
        counts = torch.bincount(flat, minlength=self.w1.shape[0])
        return w.reshape(-1)[order], rows, counts, flat[order]

    def forward_loop(self, x, idx):
        w, rows, counts, _ = self.route(x, idx)
        xs = x[rows]
        outs, start = [], 0
        for e, c in enumerate(counts.tolist()):
            h = F.gelu(xs[start:start + c] @ self.w1[e] + self.b1[e], approximate="tanh")
            outs.append(h @ self.w2[e] + self.b2[e])
            start += c
        y = torch.cat(outs) * w.unsqueeze(1)
        return torch.zeros_like(x).index_add(0, rows, y)

    def forward_grouped(self, x, idx):
        w, rows, counts, sorted_experts = self.route(x, idx)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = x[rows]
        h = torch._grouped_mm(xs, self.w1, offs=offs) + self.b1[sorted_experts]
        y = torch._grouped_mm(F.gelu(h, approximate="tanh"), self.w2, offs=offs) + self.b2[sorted_experts]
        return torch.zeros_like(x).index_add(0, rows, y * w.unsqueeze(1))


def time_impl(layer, impl, x, idx, gout, warmup, iters):
    fwd = layer.forward_loop if impl == "loop" else layer.forward_grouped
    for _ in range(warmup):
        fwd(x, idx).backward(gout)
    if x.device.type != "cuda":
        start = time.perf_counter()
        for _ in range(iters):
            fwd(x, idx).backward(gout)
        return (time.perf_counter() - start) / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fwd(x, idx).backward(gout)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0 / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", help="write one JSON object per line here")
    ap.add_argument("--cpu-smoke", action="store_true", help="run tiny shapes on the CPU (checks the script, times nothing useful)")
    args = ap.parse_args()
    if args.cpu_smoke:
        global SIZES
        SIZES = {"tiny": (16, 8)}
        args.tokens, args.warmup, args.iters = 64, 1, 1
    elif not torch.cuda.is_available():
        print("torch_moe_layer: no CUDA device; nothing measured")
        return 0
    dev = torch.device("cpu" if args.cpu_smoke else "cuda")
    torch.manual_seed(0)
    results = []
    where = "CPU (smoke)" if args.cpu_smoke else torch.cuda.get_device_name(0)
    print(f"PyTorch {torch.__version__} on {where}, {args.tokens} tokens per pass")
    print(f"{'model':6} {'k':>2} {'skew':>5} {'impl':8} {'ms':>8} {'tokens/s':>12} {'TFLOP/s':>8}")
    for name, (d, experts) in SIZES.items():
        layer = MoeLayer(d, experts, dev)
        x = (torch.randn(args.tokens, d, device=dev, dtype=torch.bfloat16)).requires_grad_()
        gout = torch.randn(args.tokens, d, device=dev, dtype=torch.bfloat16)
        for k in (1, 2):
            for skew in (1.0, 4.0):
                idx = forced_routing(args.tokens, k, experts, skew, dev)
                flops = 3 * 2 * args.tokens * k * (8 * d * d)
                for impl in ("loop", "grouped"):
                    try:
                        s = time_impl(layer, impl, x, idx, gout, args.warmup, args.iters)
                    except (RuntimeError, AttributeError) as e:   # _grouped_mm missing or unsupported
                        print(f"{name:6} {k:>2} {skew:>5.0f} {impl:8} n/a ({str(e).splitlines()[0][:60]})")
                        continue
                    layer.zero_grad(set_to_none=True)
                    x.grad = None
                    row = dict(model=name, d=d, experts=experts, k=k, skew=skew, impl="torch-" + impl,
                               ms=s * 1e3, tokens_per_s=args.tokens / s, tflops=flops / s / 1e12)
                    results.append(row)
                    print(f"{name:6} {k:>2} {skew:>5.0f} {impl:8} {row['ms']:8.3f} {row['tokens_per_s']:12.0f} "
                          f"{row['tflops']:8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
