#!/usr/bin/python3
"""hf_import.py — `salamander import` of a Hugging Face-style moe-llama checkpoint is the same model.

Builds two small models in the Hugging Face layout on its own (no download): a Mixtral (softmax
router, renormalised top-2, grouped-query attention, untied head; F32) and one in the mlp naming
with what Mixtral lacks (sigmoid router, renormalised top-3 of 6, one key/value head, a DeepSeek-style
shared expert, tied head; BF16, so the import widens it), and that one again with DeepSeek-V3's
routing bias (topk_method noaux_tc: e_score_correction_bias added to the scores to choose the
experts, not to weigh them; F32), and an OLMoE (QK-norm over the whole query and key vectors,
softmax router without renormalisation, num_experts; BF16) and a Qwen2-MoE (q, k and v biases, one
shared expert gated by a sigmoid; F32). Each gets random weights, a config.json and a
model.safetensors written with struct, is imported with `salamander import`, and its logits
(`salamander sample --checkpoint DIR --logits IDS`) are compared with an independent forward pass
written here in plain Python from the transformers definitions (RMSNorm, rotate-half rotary
positions, repeat_kv, the routers, SwiGLU). Passes when every logit agrees within TOLERANCE; then
it must fail: one weight of the file perturbed, the same comparison must exceed it.

Then the round trip, for the Mixtral, the OLMoE and the Qwen2-MoE import: each trains 10 steps (`salamander run` of the job file the
import wrote, --resume from it, on a uint16 token file), the run's checkpoint is exported with
--optimizer (model.safetensors and config.json) and imported again; every unit file (weights,
AdamW's moments, step) must equal the run's byte for byte.

Exit codes: 0 pass, 1 fail, 77 skipped (never: it needs only /usr/bin/python3).
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from run_cli import run  # noqa: E402  (beside this script)

TOLERANCE = 1e-4    # largest |logit difference| accepted (fp32 against Python's doubles)
PERTURBATION = 0.5  # added to one weight for the must-fail check

MIXTRAL = {"model_type": "mixtral", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 12,
           "vocab_size": 40, "max_position_embeddings": 32, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
           "tie_word_embeddings": False, "router_aux_loss_coef": 0.01}
FINE = {"model_type": "salamander_moe_llama", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "n_routed_experts": 6, "num_experts_per_tok": 3, "moe_intermediate_size": 8,
        "n_shared_experts": 1, "scoring_func": "sigmoid", "norm_topk_prob": True, "vocab_size": 30,
        "max_position_embeddings": 16, "rope_theta": 500.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
V3 = dict(FINE, topk_method="noaux_tc", n_group=1, topk_group=1)
OLMOE = {"model_type": "olmoe", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 4, "num_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 8,
         "norm_topk_prob": False, "vocab_size": 40, "max_position_embeddings": 32, "rope_theta": 10000.0,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "router_aux_loss_coef": 0.01,
         "router_z_loss_coef": 0.001}
QWEN2 = {"model_type": "qwen2_moe", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
         "shared_expert_intermediate_size": 16, "intermediate_size": 64, "norm_topk_prob": False,
         "vocab_size": 40, "max_position_embeddings": 32, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
         "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 32,
         "decoder_sparse_step": 1, "mlp_only_layers": []}


# --- the model in the HF layout -------------------------------------------------------------------

def bf16(x):
    """x rounded to the nearest bfloat16 (ties to even), as a float."""
    (bits,) = struct.unpack("<I", struct.pack("<f", x))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def tensor_shapes(c):
    d, kv = c["hidden_size"], c["hidden_size"] // c["num_attention_heads"] * c["num_key_value_heads"]
    mixtral = c["model_type"] == "mixtral"
    E = c.get("num_local_experts") or c.get("n_routed_experts") or c.get("num_experts")
    F = c.get("moe_intermediate_size") or c.get("intermediate_size")
    S = F * c.get("n_shared_experts", 0) or c.get("shared_expert_intermediate_size", 0)
    qwen = c["model_type"] == "qwen2_moe"  # attention biases, one gated shared expert
    V = c["vocab_size"]
    shapes = {"model.embed_tokens.weight": [V, d], "model.norm.weight": [d]}
    if not c["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [V, d]
    for L in range(c["num_hidden_layers"]):
        at = f"model.layers.{L}."
        shapes.update({at + "input_layernorm.weight": [d], at + "post_attention_layernorm.weight": [d],
                       at + "self_attn.q_proj.weight": [d, d], at + "self_attn.k_proj.weight": [kv, d],
                       at + "self_attn.v_proj.weight": [kv, d], at + "self_attn.o_proj.weight": [d, d]})
        if c["model_type"] == "olmoe":  # QK-norm over the whole query and key vectors
            shapes.update({at + "self_attn.q_norm.weight": [d], at + "self_attn.k_norm.weight": [kv]})
        if qwen:
            shapes.update({at + "self_attn.q_proj.bias": [d], at + "self_attn.k_proj.bias": [kv],
                           at + "self_attn.v_proj.bias": [kv], at + "mlp.shared_expert_gate.weight": [1, d]})
        moe = at + ("block_sparse_moe." if mixtral else "mlp.")
        shapes[moe + "gate.weight"] = [E, d]
        if c.get("topk_method") == "noaux_tc":
            shapes[moe + "gate.e_score_correction_bias"] = [E]
        names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        for e in range(E):
            x = f"{moe}experts.{e}."
            shapes.update({x + names[0] + ".weight": [F, d], x + names[1] + ".weight": [F, d],
                           x + names[2] + ".weight": [d, F]})
        if S:
            sh = at + ("mlp.shared_expert." if qwen else "mlp.shared_experts.")
            shapes.update({sh + "gate_proj.weight": [S, d], sh + "up_proj.weight": [S, d],
                           sh + "down_proj.weight": [d, S]})
    return shapes


def random_weights(c, seed, round_bf16):
    rng = random.Random(seed)
    weights = {}
    for name, shape in tensor_shapes(c).items():
        n = math.prod(shape)
        if name.endswith("layernorm.weight") or name.endswith("_norm.weight") or name == "model.norm.weight":
            vals = [1.0 + rng.gauss(0, 0.1) for _ in range(n)]
        else:
            vals = [rng.gauss(0, 0.3) for _ in range(n)]
        weights[name] = (shape, [bf16(v) if round_bf16 else v for v in vals])
    return weights


def write_safetensors(path, weights, dtype):
    header, blobs, offset = {}, [], 0
    for name, (shape, vals) in weights.items():
        if dtype == "F32":
            blob = struct.pack(f"<{len(vals)}f", *vals)
        else:  # BF16: the upper half of each float's bits (the values are bf16 already)
            blob = b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_model(directory, c, weights, dtype):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(c, f)
    write_safetensors(os.path.join(directory, "model.safetensors"), weights, dtype)


# --- the independent forward pass (transformers' definitions, in doubles) ---------------------------

def matvec(w, shape, x):
    """y = W x for W [out, in] stored row-major (nn.Linear)."""
    out, inp = shape
    return [sum(w[o * inp + i] * x[i] for i in range(inp)) for o in range(out)]


def rms_norm(x, g, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * gi for v, gi in zip(x, g)]


def rotate(v, pos, theta):
    """Rotary positions on one head (rotate_half: pairs i and i + hd/2)."""
    hd, h = len(v), len(v) // 2
    out = list(v)
    for i in range(h):
        a = pos * theta ** (-2.0 * i / hd)
        out[i] = v[i] * math.cos(a) - v[i + h] * math.sin(a)
        out[i + h] = v[i + h] * math.cos(a) + v[i] * math.sin(a)
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


def swiglu(W, names, x):
    g, u, dn = (W[n] for n in names)
    a = [silu(p) * q for p, q in zip(matvec(g[1], g[0], x), matvec(u[1], u[0], x))]
    return matvec(dn[1], dn[0], a)


def attention(W, c, at, h, T):
    d, H, KVH = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, theta = d // H, c["rope_theta"]
    q = [matvec(W[at + "self_attn.q_proj.weight"][1], [d, d], h[t]) for t in range(T)]
    k = [matvec(W[at + "self_attn.k_proj.weight"][1], [KVH * hd, d], h[t]) for t in range(T)]
    v = [matvec(W[at + "self_attn.v_proj.weight"][1], [KVH * hd, d], h[t]) for t in range(T)]
    if c["model_type"] == "qwen2_moe":  # Qwen2MoeAttention: q, k and v projections with biases
        q = [[a + b for a, b in zip(q[t], W[at + "self_attn.q_proj.bias"][1])] for t in range(T)]
        k = [[a + b for a, b in zip(k[t], W[at + "self_attn.k_proj.bias"][1])] for t in range(T)]
        v = [[a + b for a, b in zip(v[t], W[at + "self_attn.v_proj.bias"][1])] for t in range(T)]
    if c["model_type"] == "olmoe":  # OlmoeAttention: q_norm(q_proj(h)), k_norm(k_proj(h)), then the rotation
        q = [rms_norm(q[t], W[at + "self_attn.q_norm.weight"][1], c["rms_norm_eps"]) for t in range(T)]
        k = [rms_norm(k[t], W[at + "self_attn.k_norm.weight"][1], c["rms_norm_eps"]) for t in range(T)]
    out = [[0.0] * d for _ in range(T)]
    for head in range(H):
        kvh = head // (H // KVH)  # repeat_kv
        qs = [rotate(q[t][head * hd:(head + 1) * hd], t, theta) for t in range(T)]
        ks = [rotate(k[t][kvh * hd:(kvh + 1) * hd], t, theta) for t in range(T)]
        vs = [v[t][kvh * hd:(kvh + 1) * hd] for t in range(T)]
        for t in range(T):
            s = [sum(a * b for a, b in zip(qs[t], ks[j])) / math.sqrt(hd) for j in range(t + 1)]
            m = max(s)
            p = [math.exp(x - m) for x in s]
            z = sum(p)
            for i in range(hd):
                out[t][head * hd + i] = sum(p[j] / z * vs[j][i] for j in range(t + 1))
    return [matvec(W[at + "self_attn.o_proj.weight"][1], [d, d], out[t]) for t in range(T)]


def moe(W, c, at, x):
    mixtral = c["model_type"] == "mixtral"
    moe_at = at + ("block_sparse_moe." if mixtral else "mlp.")
    E = c.get("num_local_experts") or c.get("n_routed_experts") or c.get("num_experts")
    k = c["num_experts_per_tok"]
    logits = matvec(W[moe_at + "gate.weight"][1], [E, len(x)], x)
    if c.get("scoring_func", "softmax") == "sigmoid":
        scores = [1.0 / (1.0 + math.exp(-z)) for z in logits]
    else:
        m = max(logits)
        p = [math.exp(z - m) for z in logits]
        scores = [v / sum(p) for v in p]
    choice = scores  # DeepSeek-V3's noaux_tc: the bias chooses, the scores weigh
    if c.get("topk_method") == "noaux_tc":
        choice = [s + b for s, b in zip(scores, W[moe_at + "gate.e_score_correction_bias"][1])]
    chosen = sorted(range(E), key=lambda e: (-choice[e], e))[:k]
    weights = [scores[e] for e in chosen]
    if mixtral or c.get("norm_topk_prob", False):
        weights = [w / sum(weights) for w in weights]
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    y = [0.0] * len(x)
    for e, w in zip(chosen, weights):
        o = swiglu(W, [f"{moe_at}experts.{e}.{n}.weight" for n in names], x)
        y = [a + w * b for a, b in zip(y, o)]
    if c.get("n_shared_experts", 0):
        o = swiglu(W, [f"{at}mlp.shared_experts.{n}.weight" for n in ("gate_proj", "up_proj", "down_proj")], x)
        y = [a + b for a, b in zip(y, o)]
    if c.get("shared_expert_intermediate_size", 0):  # Qwen2-MoE: sigmoid(shared_expert_gate(x)) * shared_expert(x)
        o = swiglu(W, [f"{at}mlp.shared_expert.{n}.weight" for n in ("gate_proj", "up_proj", "down_proj")], x)
        g = 1.0 / (1.0 + math.exp(-sum(a * b for a, b in zip(W[at + "mlp.shared_expert_gate.weight"][1], x))))
        y = [a + g * b for a, b in zip(y, o)]
    return y


def reference_logits(c, W, ids):
    d, V, eps = c["hidden_size"], c["vocab_size"], c["rms_norm_eps"]
    emb = W["model.embed_tokens.weight"][1]
    x = [emb[i * d:(i + 1) * d] for i in ids]
    T = len(ids)
    for L in range(c["num_hidden_layers"]):
        at = f"model.layers.{L}."
        h = [rms_norm(x[t], W[at + "input_layernorm.weight"][1], eps) for t in range(T)]
        a = attention(W, c, at, h, T)
        x = [[p + q for p, q in zip(x[t], a[t])] for t in range(T)]
        h = [rms_norm(x[t], W[at + "post_attention_layernorm.weight"][1], eps) for t in range(T)]
        x = [[p + q for p, q in zip(x[t], moe(W, c, at, h[t]))] for t in range(T)]
    head = emb if c["tie_word_embeddings"] else W["lm_head.weight"][1]
    return [matvec(head, [V, d], rms_norm(x[t], W["model.norm.weight"][1], eps)) for t in range(T)]


# --- the checks -----------------------------------------------------------------------------------

def engine_logits(ckpt, seqs):
    ids = ";".join(",".join(str(i) for i in s) for s in seqs)
    out = run(timeout=300, cmd=[ARGS.salamander, "sample", "--checkpoint", ckpt, "--logits", ids])
    return json.loads(out)["logits"]


def max_difference(c, W, ckpt, seqs):
    ours = engine_logits(ckpt, seqs)
    worst = 0.0
    for s, seq in enumerate(seqs):
        ref = reference_logits(c, W, seq)
        for t in range(len(seq)):
            worst = max(worst, max(abs(a - b) for a, b in zip(ours[s][t], ref[t])))
    return worst


def check_model(work, label, c, dtype, perturb):
    W = random_weights(c, 11, dtype == "BF16")
    src = os.path.join(work, label)
    write_model(src, c, W, dtype)
    ckpt = os.path.join(work, label + "-ckpt")
    run(timeout=300, cmd=[ARGS.salamander, "import", src, "--out", ckpt])
    rng = random.Random(5)
    seqs = [[rng.randrange(c["vocab_size"]) for _ in range(8)] for _ in range(2)]
    diff = max_difference(c, W, ckpt, seqs)
    print(f"{label}: largest logit difference {diff:.3g} (tolerance {TOLERANCE:g})")
    if not diff <= TOLERANCE:
        sys.exit(f"FAIL: {label}: the imported model's logits differ from the reference by {diff:.3g}")
    # must fail: one weight of the file moved, the engine's logits leave the reference's
    shape, vals = W[perturb]
    moved = dict(W)
    moved[perturb] = (shape, [v + (PERTURBATION if i == 3 else 0.0) for i, v in enumerate(vals)])
    write_model(src, c, moved, "F32")
    run(timeout=300, cmd=[ARGS.salamander, "import", src, "--out", ckpt + "-moved"])
    moved_diff = max_difference(c, W, ckpt + "-moved", seqs)
    print(f"{label}: with {perturb}[3] moved by {PERTURBATION}: {moved_diff:.3g}")
    if not moved_diff > TOLERANCE:
        sys.exit(f"FAIL: {label}: a perturbed weight went unnoticed ({moved_diff:.3g})")
    return ckpt


def unit_files(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".bin"))


def round_trip(work, ckpt, label, c):
    """import -> run 10 steps -> export --optimizer -> import: the same units, byte for byte."""
    work = os.path.join(work, label + "-trip")
    os.makedirs(work)
    with open(os.path.join(ckpt, "job.lua")) as f:
        job = f.read()
    tokens = os.path.join(work, "tokens.u16")
    with open(tokens, "wb") as f:
        f.write(struct.pack("<4000H", *[(i * 7 + i // 3) % c["vocab_size"] for i in range(4000)]))
    job = job.replace('path = "tokens.uint16"', f'path = "{tokens}"').replace("seq_len = 32", "seq_len = 16")
    job = job.replace("train = { steps = 100, batch = 16, lr = 1e-4, warmup = 10 }",
                      "train = { steps = 100, batch = 8, lr = 1e-3, warmup = 2, checkpoint_every = 0 },\n"
                      "  policies = { slots = 4 }")
    job_file = os.path.join(work, "job.lua")
    with open(job_file, "w") as f:
        f.write(job)
    run_dir = os.path.join(work, "run")
    run(timeout=300, cmd=[ARGS.salamander, "run", job_file, "--resume", ckpt, "--steps", "10", "--nodes", "2", "--out", run_dir])
    export_dir = os.path.join(work, "export")
    os.makedirs(export_dir)
    run(timeout=300, cmd=[ARGS.salamander, "export", "--checkpoint", run_dir, "--optimizer",
         "--out", os.path.join(export_dir, "model.safetensors")])
    again = os.path.join(work, "again")
    run(timeout=300, cmd=[ARGS.salamander, "import", export_dir, "--out", again])
    trained = os.path.join(run_dir, "checkpoint")
    names = unit_files(trained)
    if not names or names != unit_files(again):
        sys.exit(f"FAIL: {label} round trip: unit files {names} against {unit_files(again)}")
    for n in names:
        with open(os.path.join(trained, n), "rb") as a, open(os.path.join(again, n), "rb") as b:
            if a.read() != b.read():
                sys.exit(f"FAIL: {label} round trip: {n} differs after export and import")
    with open(os.path.join(ckpt, names[1]), "rb") as a, open(os.path.join(again, names[1]), "rb") as b:
        if a.read() == b.read():
            sys.exit(f"FAIL: {label} round trip: the 10 steps changed nothing (the comparison would not see a loss)")
    print(f"{label} round trip: {len(names)} units equal byte for byte (weights, moments, step) after 10 steps, export and import")


def main():
    work = tempfile.mkdtemp(prefix="sal-hf-import-")
    try:
        mixtral = check_model(work, "mixtral", MIXTRAL, "F32", "model.layers.0.self_attn.k_proj.weight")
        check_model(work, "fine", FINE, "BF16", "model.layers.0.mlp.shared_experts.down_proj.weight")
        check_model(work, "v3-bias", V3, "F32", "model.layers.0.mlp.gate.e_score_correction_bias")
        olmoe = check_model(work, "olmoe", OLMOE, "BF16", "model.layers.1.self_attn.k_norm.weight")
        qwen2 = check_model(work, "qwen2", QWEN2, "F32", "model.layers.0.mlp.shared_expert_gate.weight")
        round_trip(work, mixtral, "mixtral", MIXTRAL)
        round_trip(work, olmoe, "olmoe", OLMOE)
        round_trip(work, qwen2, "qwen2", QWEN2)
        print("PASS")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--salamander", required=True)
    ARGS = parser.parse_args()
    main()
