"""mcr.torch.bench's correctness column (#wrong): each variant's output is checked on its own, so a
variant that leaves the output unwritten is counted wrong even after a correct variant filled the
same buffer. Run under mpirun with 2 ranks."""

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
    finish("bench checks")


if __name__ == "__main__":
    main()
