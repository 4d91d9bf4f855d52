"""nccl-tests-style table: torch.distributed on mcr against torch's own gloo backend, same run.

    mpirun -np 2 python3 -m mcr.torch.bench [-b 4] [-e 64M] [-f 4] [--op all_reduce]

Columns: time per operation in microseconds (the slowest rank's mean over the timed iterations) and
bus bandwidth, for torch's gloo ProcessGroup, mcr's automatic selection and mcr forced to each
backend, then mcr auto's speedup over gloo. Sizes are the op's global message size, as in
nccl-tests and `mcr bench`.
"""

import argparse
import time

import torch
import torch.distributed as dist

import mcr.torch as mt


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def make_op(op, nbytes, dtype, ws):
    esize = torch.tensor([], dtype=dtype).element_size()
    count = max(nbytes // esize, 1)
    if op == "all_reduce":
        t = torch.ones(count, dtype=dtype)
        return count, 2 * (ws - 1) / ws, lambda group: dist.all_reduce(t, group=group)
    if op == "all_gather":
        per = max(count // ws, 1)
        out, inp = torch.empty(per * ws, dtype=dtype), torch.ones(per, dtype=dtype)
        outs = list(out.chunk(ws))  # gloo has no flat all_gather in 1.13: use its list form
        return per * ws, (ws - 1) / ws, lambda group: (
            dist.all_gather(outs, inp, group=group) if group is not None
            else dist.all_gather_into_tensor(out, inp))
    if op == "all_to_all":
        per = max(count // ws, 1) * ws
        inp, out = torch.ones(per, dtype=dtype), torch.empty(per, dtype=dtype)
        return per, (ws - 1) / ws, lambda group: dist.all_to_all_single(out, inp, group=group)
    raise SystemExit(f"unknown op {op}")


def time_op(fn, group, iters, warmup):
    for _ in range(warmup):
        fn(group)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn(group)
    elapsed = (time.perf_counter() - start) / iters
    t = torch.tensor([elapsed], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # on mcr: the slowest rank sets the figure
    return t.item() * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--minbytes", default="4")
    p.add_argument("-e", "--maxbytes", default="64M")
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("--op", default="all_reduce", choices=["all_reduce", "all_gather", "all_to_all"])
    p.add_argument("--dtype", default="float32")
    p.add_argument("--backends", default="auto,mpi,gloo", help="mcr variants (auto = selection)")
    p.add_argument("--iters", type=int, default=0, help="timed iterations (0: by size)")
    a = p.parse_args()

    mt.init_processes("mcr")
    ws = dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    dtype = getattr(torch, a.dtype)
    usable = set(["gloo"] + (["mpi"] if mt._backend.launched_by_mpi() else []))
    variants = [b for b in a.backends.split(",") if b == "auto" or b in usable]
    if dist.get_rank() == 0:
        head = f"{'size':>8} {'count':>10} {'torch-gloo us':>14}"
        head += "".join(f" {'mcr-' + v + ' us':>12}" for v in variants)
        print(f"# {a.op}, {a.dtype}, {ws} ranks; time per op (slowest rank), busbw in GB/s\n{head}"
              f" {'gloo busbw':>10} {'mcr busbw':>10} {'speedup':>8}", flush=True)
    size = parse_size(a.minbytes)
    while size <= parse_size(a.maxbytes):
        count, factor, fn = make_op(a.op, size, dtype, ws)
        iters = a.iters or max(5, min(2000, (64 << 20) // max(size, 1) // 8))
        warmup = max(2, iters // 10)
        gloo_us = time_op(fn, gloo, iters, warmup)
        mcr_us = []
        for v in variants:
            with mt.backend(None if v == "auto" else v):
                mcr_us.append(time_op(fn, None, iters, warmup))
        if dist.get_rank() == 0:
            bw = lambda us: size * factor / us / 1e3  # noqa: E731 - bytes/us -> GB/s
            row = f"{human(size):>8} {count:>10} {gloo_us:>14.1f}" + "".join(f" {u:>12.1f}" for u in mcr_us)
            print(f"{row} {bw(gloo_us):>10.3f} {bw(mcr_us[0]):>10.3f} {gloo_us / mcr_us[0]:>7.1f}x",
                  flush=True)
        size *= a.stepfactor


if __name__ == "__main__":
    main()
