#!/usr/bin/python3
"""torch_export.py — a Salamander checkpoint, exported as safetensors, is the same model in PyTorch.

Trains a small moe-gpt on real text with `salamander run` (2 nodes, so the checkpoint is assembled
from two workers' units), exports it with `salamander export --format safetensors`, parses the file
with plain Python (struct + json + torch.frombuffer; Debian has no safetensors package), loads the
tensors into the eager PyTorch model of tests/bench/torch_moe_gpt.py (its module definitions, our
weights: a matrix we store as [in, out] is nn.Linear's weight transposed), runs a batch of byte
windows of README.md (8 x 16 tokens) through it, and compares its logits with the engine's own
(`salamander sample --checkpoint RUN --logits IDS`).

Passes when every logit agrees within TOLERANCE (absolute, in logit units: both sides compute in
fp32, and only the order of additions differs). Then it checks that it can fail: with one weight of
the file perturbed the same comparison must exceed the tolerance.

Exit codes: 0 pass, 1 fail, 77 skipped (no PyTorch in /usr/bin/python3: `apt-get install
python3-torch` to run it; CI has none). Every process it starts ends before it exits.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from run_cli import run  # noqa: E402  (beside this script)

try:
    import torch
except ImportError:
    print("skipped: /usr/bin/python3 cannot import torch (Debian's python3-torch runs this test)")
    sys.exit(77)

TOLERANCE = 1e-4     # largest |logit difference| accepted, in logit units (measured: about 2e-6)
PERTURBATION = 0.5   # added to one weight for the must-fail check
DTYPES = {"F32": torch.float32}
JOB = """return {{
  name = "export-torch",
  model = {{ layers = 2, d_model = 32, heads = 4, experts = 4, top_k = 2, seq_len = 16 }},
  data = {{ path = "{docs}" }},
  train = {{ batch = 8, lr = 1e-2, warmup = 5, checkpoint_every = 0 }},
}}
"""


def read_safetensors(path):
    """(tensors by name, metadata) of a safetensors file, parsed by hand."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = bytearray(data[8 + n:])
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        flat = torch.frombuffer(body, dtype=DTYPES[t["dtype"]], offset=begin, count=(end - begin) // 4)
        tensors[name] = flat.reshape(t["shape"]).clone()
    return tensors, meta


def state_dict(tensors, meta):
    """Our names -> torch_moe_gpt's module parameters (matrices transposed: ours are [in, out])."""
    sd = {
        "tok.weight": tensors["embed.tokens"],
        "pos.weight": tensors["embed.positions"],
        "lnf.weight": tensors["final_norm.weight"],
        "lnf.bias": tensors["final_norm.bias"],
    }
    for layer in range(int(meta["layers"])):
        ours, theirs = f"layers.{layer}.", f"blocks.{layer}."
        for norm in ("ln1", "ln2"):
            for p in ("weight", "bias"):
                sd[f"{theirs}{norm}.{p}"] = tensors[f"{ours}{norm}.{p}"]
        sd[theirs + "attn.qkv.weight"] = tensors[ours + "attn.w_qkv"].t()
        sd[theirs + "attn.qkv.bias"] = tensors[ours + "attn.b_qkv"]
        sd[theirs + "attn.out.weight"] = tensors[ours + "attn.w_o"].t()
        sd[theirs + "attn.out.bias"] = tensors[ours + "attn.b_o"]
        sd[theirs + "moe.gate.weight"] = tensors[ours + "gate.w"].t()
        for e in range(int(meta["experts"])):
            src, dst = f"{ours}experts.{e}.", f"{theirs}moe.experts.{e}."
            for w, b in (("w1", "b1"), ("w2", "b2")):
                sd[dst + w + ".weight"] = tensors[src + w].t()
                sd[dst + w + ".bias"] = tensors[src + b]
    return sd


def torch_model(tensors, meta):
    sys.path.insert(0, os.path.join(ARGS.source, "tests", "bench"))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import torch_moe_gpt  # the bench's eager model: its module definitions
    m = torch_moe_gpt.MoeGpt(int(meta["layers"]), int(meta["d_model"]), int(meta["heads"]), int(meta["experts"]),
                             int(meta["top_k"]), int(meta["seq_len"]), vocab=int(meta["vocab"]))
    sd = state_dict(tensors, meta)
    sd["mask"] = m.mask  # a buffer of the module, not a weight
    m.load_state_dict(sd, strict=True)
    return m.eval()


def batch(meta):
    """Eight windows of seq_len bytes of README.md (byte-level tokens: id = byte value)."""
    assert meta["tokens"] == "bytes", f"a byte-level model was trained, the file says tokens = {meta['tokens']}"
    with open(os.path.join(ARGS.source, "README.md"), "rb") as f:
        text = f.read()
    T = int(meta["seq_len"])
    return [list(text[start:start + T]) for start in range(0, 8 * 997, 997)]


def max_difference(model, ids, ours):
    with torch.no_grad():
        theirs, _ = model.logits(torch.tensor(ids, dtype=torch.long))
    return (theirs - ours).abs().max().item()


def main():
    work = tempfile.mkdtemp(prefix="sal-export-torch-")
    try:
        job = os.path.join(work, "job.lua")
        with open(job, "w") as f:
            f.write(JOB.format(docs=os.path.join(ARGS.source, "docs")))
        run_dir = os.path.join(work, "run")
        printed = run([ARGS.salamander, "run", job, "--steps", "40", "--nodes", "2", "--json", "--out", run_dir])
        summary = json.loads(printed[printed.rindex('{"job"'):].splitlines()[0])
        out = os.path.join(work, "model.safetensors")
        run([ARGS.salamander, "export", "--checkpoint", run_dir, "--format", "safetensors", "--out", out])
        tensors, meta = read_safetensors(out)
        ids = batch(meta)
        engine = json.loads(run([ARGS.salamander, "sample", "--checkpoint", run_dir, "--logits",
                                 ";".join(",".join(str(t) for t in seq) for seq in ids)]))
        ours = torch.tensor(engine["logits"], dtype=torch.float32)
        assert engine["step"] == int(meta["step"]) == 40, (engine["step"], meta["step"])
        diff = max_difference(torch_model(tensors, meta), ids, ours)
        print(f"trained 40 steps (loss {summary['first_loss']:.3f} -> {summary['final_loss']:.3f}); "
              f"{len(tensors)} tensors; logits {list(ours.shape)}, max |PyTorch - Salamander| = {diff:.3g} "
              f"(tolerance {TOLERANCE:g}, largest |logit| {ours.abs().max().item():.3g})")
        if not diff <= TOLERANCE:
            print("FAIL: the logits differ by more than the tolerance")
            return 1
        name = ARGS.perturb
        tensors[name].view(-1)[0] += PERTURBATION
        perturbed = max_difference(torch_model(tensors, meta), ids, ours)
        print(f"with {name}[0] + {PERTURBATION:g}: max difference {perturbed:.3g}")
        if not perturbed > TOLERANCE:
            print("FAIL: a perturbed weight went unnoticed: the comparison cannot fail")
            return 1
        print("PASS")
        return 0
    finally:
        if ARGS.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--salamander", required=True, help="the salamander binary")
    p.add_argument("--source", required=True, help="the repository (README.md, docs/, tests/bench/)")
    p.add_argument("--perturb", default="layers.1.attn.w_o", help="the tensor perturbed by the must-fail check")
    p.add_argument("--keep", action="store_true", help="keep the work directory (run, export)")
    args = p.parse_args()
    args.salamander, args.source = os.path.abspath(args.salamander), os.path.abspath(args.source)
    return args


if __name__ == "__main__":
    ARGS = parse_args()
    sys.exit(main())
