"""mcr.torch.bench's correctness column (#wrong): each variant's output is checked on its own, so a
variant that leaves the output unwritten is counted wrong even after a correct variant filled the
same buffer; its check values stay exact at any rank count; --dtype takes mcr bench's names. Run
under mpirun with 2 ranks."""

import random

import torch
import torch.distributed as dist

from common import check, finish, setup
from mcr.torch import bench


def main():
    rank, ws = setup()
    gloo = dist.new_group(backend="gloo")
    cases = [(op, torch.float32) for op in ("all_reduce", "all_gather", "all_to_all")]
    cases += [("all_gather", torch.int8), ("all_gather", torch.bool)]  # narrow types too
    for op, dtype in cases:
        count, _, fn, inp, out = bench.make_op(op, 64, dtype, ws)
        right = bench.wrong_elements(["torch-gloo", "auto", "gloo"], fn, gloo, op, inp, out)
        check(right == 0, f"{op} {dtype}: {right} wrong elements from variants that compute it")
        # "auto" does nothing: for all_reduce (in place) its input stays, which is wrong; for the
        # others the output keeps what torch-gloo wrote unless the check clears it.
        idle = lambda group: fn(group) if group is not None else None  # noqa: E731
        missed = bench.wrong_elements(["torch-gloo", "auto"], idle, gloo, op, inp, out)
        check(missed == count, f"{op} {dtype}: a variant that writes nothing gave {missed} wrong "
                               f"elements, expected all {count}")
        if rank == 0:
            print(f"{op} {dtype}: {count} elements; an idle variant is counted {missed} wrong",
                  flush=True)
    # The C++ variant runs the backend it is given (the first variant's): it ran mcr's automatic
    # choice, so that py-ovh could compare two backends.
    asked = []
    real = bench._C.time_native
    bench._C.time_native = lambda *args: (asked.append(args[6]), real(*args))[1]
    try:
        count, _, fn, inp, out = bench.make_op("all_reduce", 64, torch.float32, ws)
        bench.warm(["c++"], fn, gloo, 1, "all_reduce", inp, out, "gloo")
        bench.time_block("c++", fn, gloo, 1, "all_reduce", inp, out, "gloo")
        bench.wrong_elements(["c++"], fn, gloo, "all_reduce", inp, out, "gloo")
    finally:
        bench._C.time_native = real
    check(asked == ["gloo"] * 3, f"time_native was asked for backends {asked}, not gloo each time")
    # The probe is the measured op: a variant is kept when it runs that op.
    kept = bench.usable_variants(["auto", "gloo"], "all_to_all", torch.float32, ws)
    check(kept == ["auto", "gloo"], f"usable_variants: {kept}")
    if rank == 0:
        check_values_at_many_ranks()
    check(bench.parse_dtype("bf16", "all_gather") == torch.bfloat16, "--dtype bf16")
    check(bench.parse_dtype("int8", "all_to_all") == torch.int8, "--dtype int8")
    for name, op in (("int16", "all_gather"), ("fp8", "all_gather"), ("bool", "all_reduce")):
        try:
            bench.parse_dtype(name, op)
            check(False, f"--dtype {name} --op {op} was accepted")
        except SystemExit as e:
            check(f"--dtype {name}" in str(e), f"--dtype {name}: {e}")
    finish("bench checks")


def check_values_at_many_ranks():
    """The check values of every rank, reduced here in the dtype in random orders (as a ring or a
    tree would), and moved as all_gather and all_to_all move them, equal the expected result: at
    16 or 32 ranks int8 values overflowed (fill_ raised) and bf16 sums rounded (a false #wrong)."""
    seed = 20261207
    print(f"check values: seed {seed}", flush=True)
    rng = random.Random(seed)
    for ws in (2, 16, 32, 300):
        for dtype in (torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.int32):
            ins = []
            for r in range(ws):
                t = torch.empty(1, dtype=dtype)
                expected = bench.fill_and_expect("all_reduce", t, t, r, ws)
                ins.append(t)
            for _ in range(4):
                order = list(range(ws))
                rng.shuffle(order)
                total = ins[order[0]].clone()
                for r in order[1:]:
                    total = total + ins[r]
                check(torch.equal(total, expected),
                      f"all_reduce {dtype} at {ws} ranks: {total.item()} in order {order[:8]}..., "
                      f"expected {expected.item()}")
            for op in ("all_gather", "all_to_all"):
                per = 1 if op == "all_gather" else ws
                ins, wants = [], []
                for r in range(ws):
                    t = torch.empty(per, dtype=dtype)
                    wants.append(bench.fill_and_expect(op, t, None, r, ws))
                    ins.append(t)
                for r in range(ws):
                    got = (torch.cat(ins) if op == "all_gather"
                           else torch.cat([ins[i].view(ws, -1)[r] for i in range(ws)]))
                    check(torch.equal(got, wants[r]), f"{op} {dtype} at {ws} ranks, rank {r}")


if __name__ == "__main__":
    main()
