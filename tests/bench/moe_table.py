#!/usr/bin/env python3
"""moe_table.py — the MoE layer benchmark side by side: merges the JSON lines of bench_moe_gpu
(--json) and tests/bench/torch_moe_layer.py (--json) into one markdown table per model size.

Rows are (k, skew); columns the tokens/s (millions) of salamander-grouped, salamander-per-expert,
salamander-fused, torch-loop and torch-grouped, then ours / best torch (the best of our three over
the better of torch's two), the same five as TFLOP/s (expert GEMM FLOPs, counted alike on both
sides), and the expert MLPs' share of the measured bf16 matmul peak (bench_moe_gpu's "experts
alone", the best mode). After them: the expert GEMMs alone (no epilogues) by rows per expert.
Before the tables: the GPU, the measured ceilings and the dispatch + permute figures when
bench_moe_gpu's lines are among the inputs. Lines that are not JSON objects are skipped with a
warning on stderr; a missing measurement shows as n/a.

Usage: python3 tests/bench/moe_table.py ours.jsonl torch.jsonl [more.jsonl ...]
"""
import json
import sys

OURS = ["salamander-grouped", "salamander-per-expert", "salamander-fused"]
IMPLS = OURS + ["torch-loop", "torch-grouped"]
SHORT = {"salamander-grouped": "ours grouped", "salamander-per-expert": "ours per-expert",
         "salamander-fused": "ours fused", "torch-loop": "torch loop", "torch-grouped": "torch grouped"}
MODEL_ORDER = ["GPT-S", "GPT-M", "GPT-L"]


def read_lines(paths):
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError:
                        print(f"moe_table: {path}:{n}: not JSON, skipped", file=sys.stderr)
                        continue
                    if isinstance(obj, dict):
                        rows.append(obj)
        except OSError as e:
            print(f"moe_table: cannot read {path}: {e.strerror}", file=sys.stderr)
    return rows


def is_layer_row(r):
    return r.get("section", "moe_layer") == "moe_layer" and r.get("impl") in IMPLS and "model" in r


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def print_header(rows):
    for r in rows:
        if r.get("section") == "gpu":
            print(f"GPU: {r.get('gpu', '?')}; {r.get('libraries', '')}")
    peak = [r for r in rows if r.get("section") == "peak"]
    copy = [r for r in rows if r.get("section") == "copy"]
    if peak:
        best = max(peak, key=lambda r: r.get("tflops_best", 0))
        print(f"bf16 matmul peak (measured): {best['tflops_best']:.1f} TFLOP/s ({best.get('impl', '')}, "
              f"{best.get('n', '?')}^3)")
    if copy:
        print(f"HBM copy bandwidth (measured, read + write): {copy[-1]['gbps_best']:.0f} GB/s")
    disp = [r for r in rows if r.get("section") == "dispatch"]
    if disp:
        print()
        print("Dispatch schedule + permute, effective GB/s (x rows read + send-buffer rows written) and % of the copy "
              "bandwidth; pipeline = count, schedule, row counts, row map, permute ('stream': launched call by call, "
              "'graph': replayed from a CUDA graph)")
        print()
        print("| model | k | out | W | kept | stream us | stream GB/s | graph us | graph GB/s | % copy "
              "| permute us | permute GB/s | % copy |")
        print("|" + "---|" * 13)
        for r in disp:
            copy_gbps = r.get("copy_gbps") or 0

            def pct(g):
                return f"{100 * g / copy_gbps:.0f}%" if copy_gbps and g is not None else "n/a"

            cols = [r.get("model"), r.get("k"), r.get("out"), r.get("workers"),
                    f"{100 * r['kept_fraction']:.0f}%" if "kept_fraction" in r else "n/a",
                    fmt(r.get("pipeline_stream_us"), ".1f"), fmt(r.get("pipeline_stream_gbps"), ".0f"),
                    fmt(r.get("pipeline_us"), ".1f"), fmt(r.get("pipeline_gbps"), ".0f"), pct(r.get("pipeline_gbps")),
                    fmt(r.get("permute_us"), ".1f"), fmt(r.get("permute_gbps"), ".0f"), pct(r.get("permute_gbps"))]
            print("| " + " | ".join(str(c) for c in cols) + " |")
    print()


def layer_tables(rows):
    layer = [r for r in rows if is_layer_row(r)]
    if not layer:
        print("moe_table: no MoE layer rows in the inputs")
        return 1
    # (model, k, skew) -> impl -> row (a later line for the same cell wins)
    cells = {}
    for r in layer:
        key = (r["model"], int(r["k"]), float(r["skew"]))
        cells.setdefault(key, {})[r["impl"]] = r
    models = sorted({m for m, _, _ in cells}, key=lambda m: (MODEL_ORDER.index(m) if m in MODEL_ORDER else 99, m))
    for model in models:
        dims = next(r for r in layer if r["model"] == model)
        tokens = next((r.get("tokens") for r in layer if r["model"] == model and r.get("tokens")), None)
        print(f"MoE layer forward + backward, {model} (d = {dims['d']}, E = {dims['experts']}"
              + (f", {tokens} tokens" if tokens else "") + ")")
        print()
        head = ["k", "skew"] + [f"{SHORT[i]} Mtok/s" for i in IMPLS] + ["ours / best torch"] \
            + [f"{SHORT[i]} TFLOP/s" for i in IMPLS] + ["experts % peak"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for (m, k, skew) in sorted(key for key in cells if key[0] == model):
            c = cells[(m, k, skew)]
            tps = [c[i]["tokens_per_s"] if i in c else None for i in IMPLS]
            tfl = [c[i]["tflops"] if i in c else None for i in IMPLS]
            ours = [v for v in tps[:len(OURS)] if v is not None]
            theirs = [v for v in tps[len(OURS):] if v is not None]
            ratio = max(ours) / max(theirs) if ours and theirs else None
            pcts = [c[i].get("expert_pct_peak") for i in OURS if i in c and c[i].get("expert_pct_peak") is not None]
            cols = [str(k), f"{skew:g}"] + [fmt(None if v is None else v / 1e6, ".2f") for v in tps] + [fmt(ratio, ".2f") + ("x" if ratio else "")] \
                + [fmt(v, ".1f") for v in tfl] + [fmt(max(pcts) if pcts else None, ".0f") + ("%" if pcts else "")]
            print("| " + " | ".join(cols) + " |")
        print()
    gemm_table(rows)
    return 0


def gemm_table(rows):
    """bench_moe_gpu section (d): the expert GEMMs alone, by model and rows per expert."""
    gemms = [r for r in rows if r.get("section") == "expert_gemms"]
    if not gemms:
        return
    print("Expert GEMMs alone (the six products of forward + backward, no epilogues)")
    print()
    print("| model | experts | rows per expert | ms | TFLOP/s | % peak |")
    print("|---|---|---|---|---|---|")
    order = lambda r: (MODEL_ORDER.index(r["model"]) if r["model"] in MODEL_ORDER else 99, r["rows_per_expert"])
    for r in sorted(gemms, key=order):
        print(f"| {r['model']} | {r['experts']} | {r['rows_per_expert']} | {r['ms']:.3f} | {r['tflops']:.1f} "
              f"| {fmt(r.get('pct_peak'), '.0f')}% |")
    print()


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[-1])
        return 2
    rows = read_lines(argv[1:])
    print_header(rows)
    return layer_tables(rows)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
