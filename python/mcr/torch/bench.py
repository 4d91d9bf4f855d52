"""nccl-tests-style table: torch.distributed on mcr against torch's own gloo backend, same run.

    mpirun -np 2 python3 -m mcr.torch.bench [-b 4] [-e 64M] [-f 4] [--op all_reduce]

Columns: time per operation in microseconds for torch's gloo ProcessGroup, mcr's automatic
selection, mcr forced to each backend, and the same mcr operation issued from C++ on the
communication thread (no Python, torch dispatch or thread hand-off: what `mcr bench` measures);
then the Python-side overhead (first mcr column minus the C++ one), the bus bandwidth of gloo and
of the first mcr variant, that variant's speedup over gloo, and
#wrong: elements that differ from the expected result in one checked call of every variant
before the timed ones (the command exits with status 1 if any does).
Each point runs in blocks with the variants interleaved (a new order per block); a block's figure
is the slowest rank's mean, and the table shows the median block. Sizes are the op's global
message size, as in nccl-tests and `mcr bench`: the bytes the op moves (count x element size),
which may exceed the size asked for where the op needs a whole element per rank (all_gather,
all_to_all of 4 B on 2 ranks moves 8 B).
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import mcr.torch as mt
from mcr.torch import _backend
from mcr.torch import _mcr_torch as _C


def parse_size(s, flag):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        n = int(s[:-1]) * units[s[-1].upper()] if s and s[-1].upper() in units else int(s)
    except ValueError:
        raise SystemExit(f"mcr.torch.bench: {flag} {s!r}: not a size (e.g. 4, 64K, 1M)") from None
    if n < 1:
        raise SystemExit(f"mcr.torch.bench: {flag} {s}: must be at least 1 byte")
    return n


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def make_op(op, nbytes, dtype, ws):
    """(count, bus factor, fn(group), input, output): the op as torch.distributed calls it."""
    esize = torch.tensor([], dtype=dtype).element_size()
    count = max(nbytes // esize, 1)
    if op == "all_reduce":
        t = torch.ones(count, dtype=dtype)
        return count, 2 * (ws - 1) / ws, lambda group: dist.all_reduce(t, group=group), t, t
    if op == "all_gather":
        per = max(count // ws, 1)
        out, inp = torch.empty(per * ws, dtype=dtype), torch.ones(per, dtype=dtype)
        # The flat form for every variant, torch's gloo included (its list form copies each rank's
        # part out once more, and timed gloo slower than the form mcr ran).
        return per * ws, (ws - 1) / ws, lambda group: dist.all_gather_into_tensor(
            out, inp, group=group), inp, out
    if op == "all_to_all":
        per = max(count // ws, 1) * ws
        inp, out = torch.ones(per, dtype=dtype), torch.empty(per, dtype=dtype)
        return per, (ws - 1) / ws, lambda group: dist.all_to_all_single(out, inp, group=group), inp, out
    raise SystemExit(f"unknown op {op}")


def exact_limit(dtype):
    """The largest integer n such that the dtype holds 0..n exactly (1 for bool)."""
    if dtype == torch.bool:
        return 1
    if dtype.is_floating_point:
        return int(2 / torch.finfo(dtype).eps)  # 2^(mantissa bits + 1): 256 for bf16, 2048 fp16
    return torch.iinfo(dtype).max


def fill_and_expect(op, inp, out, rank, ws):
    """Gives `inp` rank-dependent values and returns what `out` must hold after the op. The values
    stay within what the dtype holds exactly, sums and their partial sums in any order included,
    at any rank count: int8 or bf16 at 16 ranks overflowed or rounded (a false #wrong)."""
    limit = exact_limit(inp.dtype)
    if op == "all_reduce":
        if ws * (ws + 1) // 2 <= limit:
            value = lambda r: r + 1  # noqa: E731
        else:  # 1 from the first `limit` ranks, 0 from the rest: every partial sum exact
            value = lambda r: 1 if r < limit else 0  # noqa: E731
        inp.fill_(value(rank))
        return torch.full_like(inp, sum(value(r) for r in range(ws)))
    if op == "all_gather":
        inp.fill_((rank + 1) % (limit + 1))
        return torch.cat([torch.full_like(inp, (r + 1) % (limit + 1)) for r in range(ws)])
    chunks = inp.view(ws, -1)  # all_to_all: block j goes to rank j
    for j in range(ws):
        chunks[j].fill_((rank * ws + j) % (limit + 1))
    return torch.cat([torch.full_like(chunks[0], (i * ws + rank) % (limit + 1)) for i in range(ws)])


def unlike(expected):
    """A tensor that differs from `expected` in every element, in its dtype."""
    if expected.dtype == torch.bool:
        return expected.logical_not()
    if expected.is_floating_point() or expected.is_complex():
        return -expected - 1  # the values are non-negative integers the dtype holds exactly
    return torch.bitwise_not(expected)


def wrong_elements(variants, fn, gloo, op, inp, out, native=""):
    """Elements that differ from the expected result, one checked call per variant (nccl-tests'
    #wrong), summed over the variants; the largest count of any rank."""
    rank, ws = dist.get_rank(), dist.get_world_size()
    wrong = 0
    for v in variants:
        expected = fill_and_expect(op, inp, out, rank, ws)
        if out is not inp:
            # Every element unlike what it must become: a variant that leaves elements unwritten
            # must not pass on what the previous variant wrote there. (Any dtype, any rank count.)
            out.copy_(unlike(expected))
        if v == "c++":
            _C.time_native(_backend.backend_of(), op, inp, out, 1, 0, native)
        else:
            with mt.backend(None if v in ("torch-gloo", "auto") else v):
                fn(gloo if v == "torch-gloo" else None)
        wrong += int((out != expected).sum())
    t = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def slowest(seconds):
    """The largest of the ranks' figures (reduced over mcr's default group)."""
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def time_block(variant, fn, gloo, iters, op, inp, out, native=""):
    """Seconds per operation of one block of `iters` calls, on the slowest rank. `native`: the
    backend the "c++" variant forces ("" for mcr's automatic choice)."""
    if variant == "c++":  # the same op issued from C++ on the communication thread
        return slowest(_C.time_native(_backend.backend_of(), op, inp, out, iters, 0, native))
    group = gloo if variant == "torch-gloo" else None
    with mt.backend(None if variant in ("torch-gloo", "auto") else variant):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            fn(group)
        seconds = (time.perf_counter() - start) / iters
    return slowest(seconds)  # on mcr's own choice, not the backend the block forced


def warm(variants, fn, gloo, iters, op, inp, out, native=""):
    for v in variants:
        if v == "c++":
            _C.time_native(_backend.backend_of(), op, inp, out, iters, 0, native)
            continue
        with mt.backend(None if v in ("torch-gloo", "auto") else v):
            for _ in range(iters):
                fn(gloo if v == "torch-gloo" else None)


def usable_variants(names, op, dtype, ws):
    """The mcr variants that run here: a backend this build or launch lacks (MPI under torchrun, a
    build without Gloo, NCCL without a GPU), or that cannot run `op` on `dtype` (hier has no
    all_to_all), refuses a first call on every rank alike, before anything is sent, and is left
    out with the reason. The probe is the measured op itself, at its smallest size."""
    keep = []
    fn = make_op(op, 1, dtype, ws)[2]
    for name in names:
        try:
            with mt.backend(None if name == "auto" else name):
                fn(None)
        except RuntimeError as e:
            if dist.get_rank() == 0:
                print(f"# mcr-{name} left out: {str(e).splitlines()[0]}", flush=True)
            continue
        keep.append(name)
    return keep


# `mcr bench`'s names of the element types, beside torch's own.
DTYPE_NAMES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16",
               "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64"}
BENCH_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                torch.uint8, torch.int32, torch.int64, torch.bool)


def parse_dtype(name, op):
    """--dtype as a torch dtype, checked before any rank starts."""
    dtype = getattr(torch, DTYPE_NAMES.get(name, name), None)
    if dtype not in BENCH_DTYPES:
        names = ", ".join(str(t).removeprefix("torch.") for t in BENCH_DTYPES)
        raise SystemExit(f"mcr.torch.bench: --dtype {name}: not an element type the bench runs "
                         f"(use {names}, or fp32, fp64, fp16, bf16, i8, u8, i32, i64)")
    if dtype == torch.bool and op == "all_reduce":
        raise SystemExit("mcr.torch.bench: --dtype bool with --op all_reduce: the bench sums, and "
                         "mcr has no sum of booleans (use another dtype or op)")
    return dtype


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--minbytes", default="4")
    p.add_argument("-e", "--maxbytes", default="64M")
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("--op", default="all_reduce", choices=["all_reduce", "all_gather", "all_to_all"])
    p.add_argument("--dtype", default="float32",
                   help="torch's name (float32, bfloat16, int8, ...) or mcr bench's (fp32, bf16, i8, ...)")
    p.add_argument("--backends", default="auto,mpi,gloo", help="mcr variants (auto = selection)")
    p.add_argument("--iters", type=int, default=0,
                   help="timed iterations per point and variant: each block times "
                        "max(1, N // blocks) (0: by size)")
    p.add_argument("--blocks", type=int, default=5,
                   help="blocks per point, the variants interleaved in each; the median is shown")
    a = p.parse_args()
    # Checked before any rank starts: each rank refuses alike, and nothing waits for a peer.
    if a.blocks < 1:
        raise SystemExit(f"mcr.torch.bench: --blocks {a.blocks}: must be at least 1")
    if a.stepfactor < 2:
        raise SystemExit(f"mcr.torch.bench: --stepfactor {a.stepfactor}: must be at least 2 (the "
                         "sizes would never grow past --maxbytes)")
    if a.iters < 0:
        raise SystemExit(f"mcr.torch.bench: --iters {a.iters}: must be 0 (by size) or more")
    minbytes, maxbytes = parse_size(a.minbytes, "--minbytes"), parse_size(a.maxbytes, "--maxbytes")
    dtype = parse_dtype(a.dtype, a.op)
    if maxbytes < minbytes:
        raise SystemExit(f"mcr.torch.bench: --maxbytes {a.maxbytes} is below --minbytes "
                         f"{a.minbytes}")

    mt.init_processes("mcr")
    ws = dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    mcr_variants = usable_variants(a.backends.split(","), a.op, dtype, ws)
    if not mcr_variants:  # every rank refused alike (usable_variants): every rank says so
        raise SystemExit(f"mcr.torch.bench: no variant of --backends {a.backends} can run here "
                         "(see the reasons above)")
    variants = ["torch-gloo"] + mcr_variants + ["c++"]
    # The C++ column runs the first variant's backend, so that py-ovh (their difference) is the
    # binding's own cost, not that of another backend mcr's automatic choice took.
    native = "" if mcr_variants[0] == "auto" else mcr_variants[0]
    if dist.get_rank() == 0:
        head = f"{'size':>8} {'count':>10} {'torch-gloo us':>14}"
        head += "".join(f" {'mcr-' + v + ' us':>12}" for v in mcr_variants)
        print(f"# {a.op}, {str(dtype).removeprefix('torch.')}, {ws} ranks; time per op: median over {a.blocks} blocks of the slowest"
              f" rank's mean; c++: mcr-{mcr_variants[0]} issued from C++ on the communication thread; py-ovh:"
              f" mcr-{mcr_variants[0]} minus c++\n{head} {'mcr-c++ us':>12} {'py-ovh us':>10}"
              f" {'gloo busbw':>10} {'mcr busbw':>10} {'speedup':>8} {'#wrong':>7}", flush=True)
    size = minbytes
    first = True
    total_wrong = 0
    esize = torch.tensor([], dtype=dtype).element_size()
    while size <= maxbytes:
        count, factor, fn, inp, out = make_op(a.op, size, dtype, ws)
        moved = count * esize  # the size shown and the bandwidth's: what the op moves
        iters = a.iters or max(5, min(2000, (64 << 20) // max(size, 1) // 8))
        per_block = max(1, iters // a.blocks)
        # The first point also pays for connections and caches: warm every variant far longer.
        warm(variants, fn, gloo, max(2, iters // 10) * (10 if first else 1), a.op, inp, out,
             native)
        first = False
        wrong = wrong_elements(variants, fn, gloo, a.op, inp, out, native)
        total_wrong += wrong
        times = {v: [] for v in variants}
        for b in range(a.blocks):
            order = variants[b % len(variants):] + variants[:b % len(variants)]
            for v in order:
                times[v].append(time_block(v, fn, gloo, per_block, a.op, inp, out, native))
        us = {v: statistics.median(t) * 1e6 for v, t in times.items()}
        if dist.get_rank() == 0:
            bw = lambda t: moved * factor / t / 1e3  # noqa: E731 - bytes/us -> GB/s
            lead = us[mcr_variants[0]]
            row = f"{human(moved):>8} {count:>10} {us['torch-gloo']:>14.1f}"
            row += "".join(f" {us[v]:>12.1f}" for v in mcr_variants)
            row += f" {us['c++']:>12.1f} {lead - us['c++']:>10.1f}"
            print(f"{row} {bw(us['torch-gloo']):>10.3f} {bw(lead):>10.3f} {us['torch-gloo'] / lead:>7.1f}x"
                  f" {wrong:>7}", flush=True)
        size *= a.stepfactor
    if total_wrong:
        raise SystemExit(f"mcr.torch.bench: {total_wrong} wrong elements (see #wrong)")


if __name__ == "__main__":
    main()
