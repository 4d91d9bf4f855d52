#!/usr/bin/env python3
"""Writes the example traces of `mcr replay` (docs/bench.md, examples/traces/README.md).

Every size is derived below from the model it stands for; element counts are multiples of 12 so
that every op divides evenly on 1, 2, 3 or 4 ranks. Run from anywhere: python3 make_traces.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def mult12(n):
    """n rounded down to a multiple of 12 elements (at least 12)."""
    return max(12, n - n % 12)


def write(name, doc):
    # One op per line: readable, and diffs of a regenerated trace stay small.
    head = {k: v for k, v in doc.items() if k != "ops"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    ops = ",\n".join("  " + json.dumps(op) for op in doc["ops"])
    with open(os.path.join(HERE, name), "w") as f:
        f.write("{\n" + "\n".join(lines) + '\n "ops": [\n' + ops + "\n ]\n}\n")


def dp_step():
    # DDP on a 100M-parameter model: fp32 gradients all-reduced in 25 MiB buckets (async, as DDP
    # overlaps them with the backward pass; one wait at the end), then the loss and the gradient
    # norm all-reduced as scalars (sync).
    params = 100_000_000
    bucket = mult12(25 * MIB // 4)
    ops, left = [], params
    while left > 0:
        n = mult12(min(bucket, left))
        ops.append({"op": "all_reduce", "count": n, "dtype": "fp32", "async": True})
        left -= min(bucket, left)
    ops[-1]["wait"] = True
    ops.append({"op": "all_reduce", "count": 1, "dtype": "fp32", "name": "loss"})
    ops.append({"op": "all_reduce", "count": 1, "dtype": "fp32", "name": "grad_norm"})
    write("dp_step_100m.json", {
        "format": "mcr-trace", "version": 1,
        "description": f"DDP step, {params} fp32 params in {len(ops) - 2} buckets of "
                       f"<= {bucket} elements (25 MiB), plus loss and grad-norm scalars",
        "ops": ops})


def zero3_step():
    # ZeRO-3 on GPT-2 small (12 layers, hidden 768, 124M parameters), bf16 parameters and
    # gradients. ZeRO-3 fetches parameters one submodule at a time, so the all_gathers have the
    # sizes of the submodules: the two layer norms (weight + bias, 2 h), the attention's fused QKV
    # (h x 3h + 3h) and output projection (h x h + h), the MLP's two projections (h x 4h + 4h,
    # 4h x h + h). Forward gathers them in order, backward again in reverse; each layer's gradients
    # (the sum of its submodules) are reduce-scattered as one bucket, async, and waited for before
    # the optimizer step; the loss is all-reduced. Small and large messages alternate, as in every
    # ZeRO-3 step: the layer norms are kilobytes, the projections megabytes.
    layers, h = 12, 768
    modules = [("ln_1", 2 * h), ("attn.c_attn", h * 3 * h + 3 * h), ("attn.c_proj", h * h + h),
               ("ln_2", 2 * h), ("mlp.c_fc", h * 4 * h + 4 * h), ("mlp.c_proj", 4 * h * h + h)]
    per_layer = mult12(sum(n for _, n in modules))
    ops = []
    for l in range(layers):
        for name, n in modules:
            ops.append({"op": "all_gather", "count": mult12(n), "dtype": "bf16",
                        "name": f"fwd.h{l}.{name}"})
    for l in reversed(range(layers)):
        for name, n in reversed(modules):
            ops.append({"op": "all_gather", "count": mult12(n), "dtype": "bf16",
                        "name": f"bwd.h{l}.{name}"})
        ops.append({"op": "reduce_scatter", "count": per_layer, "dtype": "bf16", "async": True,
                    "name": f"grad.h{l}"})
    ops[-1]["wait"] = True
    ops.append({"op": "all_reduce", "count": 1, "dtype": "fp32", "name": "loss"})
    write("zero3_step.json", {
        "format": "mcr-trace", "version": 1,
        "description": f"ZeRO-3 step, GPT-2 small ({layers} layers, hidden {h}): per-submodule "
                       f"bf16 all_gather fwd+bwd ({len(modules)} per layer), reduce_scatter of "
                       f"each layer's {per_layer} gradients",
        "ops": ops})


def moe_step():
    # MoE step: 6 MoE layers, 2048 tokens per rank, top-2 routing, hidden 768, bf16 activations:
    # each all_to_all moves tokens x top_k x hidden = 3,145,728 elements (6 MiB). Forward:
    # dispatch + combine per layer; backward: the same two in reverse. Then the dense (non-expert)
    # gradients, 6 layers x 4 h^2 = 14.2M fp32 params, all-reduced in two async buckets.
    layers, tokens, top_k, hidden = 6, 2048, 2, 768
    a2a = mult12(tokens * top_k * hidden)
    ops = []
    for l in range(layers):
        for what in ("dispatch", "combine"):
            ops.append({"op": "all_to_all", "count": a2a, "dtype": "bf16",
                        "name": f"fwd.layer{l}.{what}"})
    for l in reversed(range(layers)):
        for what in ("combine", "dispatch"):
            ops.append({"op": "all_to_all", "count": a2a, "dtype": "bf16",
                        "name": f"bwd.layer{l}.{what}"})
    dense = mult12(layers * 4 * hidden * hidden)
    half = mult12(dense // 2)
    ops.append({"op": "all_reduce", "count": half, "dtype": "fp32", "async": True})
    ops.append({"op": "all_reduce", "count": mult12(dense - half), "dtype": "fp32", "async": True,
                "wait": True})
    ops.append({"op": "all_reduce", "count": 1, "dtype": "fp32", "name": "loss"})
    write("moe_step.json", {
        "format": "mcr-trace", "version": 1,
        "description": f"MoE step, {layers} MoE layers, all_to_all of {a2a} bf16 "
                       f"(2048 tokens x top-2 x hidden 768), dense grads {dense} fp32",
        "ops": ops})


if __name__ == "__main__":
    dp_step()
    zero3_step()
    moe_step()
