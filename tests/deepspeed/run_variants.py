"""Trains the DeepSpeed variants of examples/deepspeed one after the other in one job and writes
each rank's losses and final parameters; with --ref, compares them with a reference run's.

    mpirun -np 2 python3 run_variants.py --dist torch-gloo --out DIR/torch-gloo
    mpirun -np 2 python3 run_variants.py --dist mcr-auto --out DIR/mcr-auto --ref DIR/torch-gloo

Variants: zero1, zero2, zero3 (parameters partitioned, prefetched), moe (DeepSpeed-MoE, expert
parallel size 2: all_to_all dispatch and combine, expert gradients reduced over the expert data
parallel groups when there are 4 ranks), pipe (deepspeed.pipe, 2 stages, ZeRO-1 within a stage).

Comparison (each rank its own files): the losses of every step and every parameter this rank holds
(its ZeRO-3 partition, its experts, its pipeline stage). With --exact both must be bit-identical.
Otherwise (where the order in which a sum over more than 2 ranks is reduced is the library's own:
see tests/deepspeed/CMakeLists.txt) the losses must agree within --loss-rtol, and each parameter
tensor within --param-frac of the largest change training made to it in the reference run. Every
tensor must have been changed by training, or the comparison would prove nothing. Every rank
prints one line per variant ("compare VARIANT: ..."); rank 0 prints "run_variants: PASSED" when
every rank agreed.
"""

import argparse
import gc
import math
import os
import sys

import torch
import torch.distributed as dist

import train

VARIANTS = {
    "zero1": ["--zero", "1"],
    "zero2": ["--zero", "2"],
    "zero3": ["--zero", "3"],
    "moe": ["--moe", "4", "--ep", "2", "--zero", "2"],
    "pipe": ["--pipe", "2", "--zero", "1"],
}


def compare(mine, ref, exact, loss_rtol, param_frac):
    """One line about `mine` against `ref`; returns (agree, line)."""
    problems = []
    lm = torch.tensor(mine["losses"], dtype=torch.float64)
    lr = torch.tensor(ref["losses"], dtype=torch.float64)
    if lm.shape != lr.shape:
        return False, f"{len(lm)} losses, the reference has {len(lr)}"
    loss_diff = (lm - lr).abs().max().item()
    if exact and not torch.equal(lm, lr):
        problems.append(f"losses differ (max |diff| {loss_diff:.3g})")
    elif not torch.allclose(lm, lr, rtol=loss_rtol, atol=0.0):
        problems.append(f"losses differ by more than rtol {loss_rtol:g} "
                        f"(max |diff| {loss_diff:.3g})")
    if sorted(mine["params"]) != sorted(ref["params"]):
        return False, "different parameter names"
    worst, worst_name, equal = 0.0, "", 0
    for key, a in mine["params"].items():
        b, init = ref["params"][key], ref["initial"][key]
        if a.shape != b.shape:
            problems.append(f"{key}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
            continue
        moved = (b.double() - init.double()).abs().max().item() if b.numel() else 0.0
        if b.numel() and moved == 0.0:
            problems.append(f"{key}: training did not change it (comparing it proves nothing)")
        if torch.equal(a, b):
            equal += 1
            continue
        d = (a.double() - b.double()).abs().max().item()
        if not math.isfinite(d):
            # A NaN or an infinity in either (max() passes NaN on, and NaN > x is false): no
            # tolerance covers it.
            which = "this run's" if not torch.isfinite(a).all() else "the reference's"
            problems.append(f"{key}: not finite ({which})")
            continue
        if d / max(moved, 1e-30) > worst:
            worst, worst_name = d / max(moved, 1e-30), key
        if exact:
            problems.append(f"{key} differs (max |diff| {d:.3g})")
        elif d > param_frac * moved:
            problems.append(f"{key} differs by {d:.3g}, more than {param_frac:g} of the "
                            f"{moved:.3g} training moved it")
    n = len(mine["params"])
    losses = "identical" if torch.equal(lm, lr) else f"max |diff| {loss_diff:.3g}"
    line = f"{len(lm)} losses {losses}, {equal}/{n} parameter tensors bit-identical"
    if equal < n:
        line += f", largest difference {worst:.3g} of the distance training moved it ({worst_name})"
    if problems:
        return False, line + ": " + "; ".join(problems[:4])
    return True, line


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dist", choices=train.DISTS, required=True)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--out", required=True)
    p.add_argument("--ref", help="reference run's --out to compare with")
    p.add_argument("--exact", action="store_true", help="require bit-identical results")
    p.add_argument("--exact-variants", default="",
                   help="without --exact: these variants (comma-separated) bit-identical still")
    p.add_argument("--loss-rtol", type=float, default=1e-5,
                   help="without --exact: relative tolerance of the losses")
    p.add_argument("--param-frac", type=float, default=0.01,
                   help="without --exact: largest parameter difference, as a fraction of the "
                        "largest change training made to that tensor in the reference run")
    opts = p.parse_args()

    common = ["--dist", opts.dist, "--steps", str(opts.steps), "--warmup", "1",
              "--skip-shm-op", "--bucket", "1e5", "--timeout", "120"]
    args = train.finish_args(train.parser().parse_args(common))
    import deepspeed
    deepspeed.utils.logger.setLevel("WARNING")
    clock = train.CommClock()
    override = train.init_dist(args, clock)
    rank = dist.get_rank()
    failed = 0
    with override:
        for name in opts.variants.split(","):
            vargs = train.finish_args(train.parser().parse_args(common + VARIANTS[name]))
            if vargs.pipe and dist.get_world_size() % vargs.pipe:
                continue
            engine, shape = train.build(vargs)
            initial = train.local_parameters(engine)
            losses, _, _ = train.train(vargs, engine, shape, clock)
            mine = {"losses": losses, "params": train.local_parameters(engine), "initial": initial}
            os.makedirs(os.path.join(opts.out, name), exist_ok=True)
            torch.save(mine, os.path.join(opts.out, name, f"rank{rank}.pt"))
            engine.destroy()
            del engine
            gc.collect()
            if opts.ref:
                ref = torch.load(os.path.join(opts.ref, name, f"rank{rank}.pt"))
                exact = opts.exact or name in opts.exact_variants.split(",")
                ok, line = compare(mine, ref, exact, opts.loss_rtol, opts.param_frac)
                failed += not ok
                print(f"compare {name} {opts.dist} rank {rank}: {'OK' if ok else 'FAIL'}: {line}",
                      flush=True)
            elif rank == 0:
                print(f"reference {name} {opts.dist}: losses "
                      + " ".join(f"{x:.5f}" for x in losses), flush=True)
    bad = torch.tensor([failed])
    dist.all_reduce(bad)
    if rank == 0:
        print("run_variants: PASSED" if bad.item() == 0 else
              f"run_variants: FAILED ({bad.item()} comparisons)", flush=True)
    sys.exit(1 if bad.item() else 0)


if __name__ == "__main__":
    main()
