"""The MCR-DL-style API refuses what it would otherwise ignore or misread, before anything runs:

- `backend=` on a group that torch runs on another backend (it would be ignored: only mcr's groups
  read it), while the same call on an mcr group runs on the backend named;
- init_processes' `timeout` that is not a timedelta (an int was accepted by mcr, then refused by
  torch after the world was formed), with None taken as torch's default;
- explain() with a reduce_op that is not a ReduceOp (a string became SUM) or without a size (0
  bytes were assumed);
- get_global_rank answers without torch's deprecation warning;
- a default group after destroy_process_group() that renumbers the ranks (mcr's world is formed
  once per process): refused at once on the ranks renumbered (here all of them);
- backend= on a rank outside the group: nothing runs there, as torch lets it; set_timeout and
  explain there say the rank is not a member (they said the group did not run on mcr);
- barrier(backend=) on a "cpu:gloo,cuda:mcr" group: torch's barrier runs it on gloo (the group has
  a host backend), so it is refused as for a host tensor (it was run on gloo, the name ignored);
- a backend name that is not a string: TypeError, and later backend() blocks work (the failed one
  stayed open: every later block raised on leaving, and left its name forced).

`--single`: run without a launcher (`python test_api_checks.py --single`): init_processes() makes a
world of one, as the runtime does, instead of torch asking for RANK; and again after
destroy_process_group().
"""

import os
import sys
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch as mt
from mcr.torch import _mcr_torch as _C
from common import check, finish, same


def refuses(what, fn, error, *words):
    try:
        fn()
    except error as e:
        for w in words:
            check(w in str(e), f"{what}: the message does not say {w!r}: {e}")
        return
    check(False, f"{what}: no {error.__name__}")


def single():
    mt.init_processes(timeout=None)
    check(dist.get_world_size() == 1 and dist.get_rank() == 0, "a world of one")
    check(dist.get_backend() == "mcr", f"default backend {dist.get_backend()}")
    t = torch.arange(4, dtype=torch.float32)
    mt.all_reduce(t)
    same(t, torch.arange(4, dtype=torch.float32), "all_reduce on a world of one")
    dist.destroy_process_group()
    mt.init_processes()
    mt.all_reduce(t)
    same(t, torch.arange(4, dtype=torch.float32), "all_reduce on a second world of one")
    dist.destroy_process_group()
    print("test_api_checks[single]: OK", flush=True)


def main():
    if "--single" in sys.argv:
        single()
        return
    refuses("init_processes(timeout=60)", lambda: mt.init_processes("gloo", timeout=60),
            TypeError, "timeout = 60", "timedelta")
    check(not dist.is_initialized(), "a refused timeout left torch.distributed initialised")
    mt.init_processes("gloo", timeout=timedelta(seconds=120))
    rank, ws = dist.get_rank(), dist.get_world_size()
    world = dist.new_group(backend="mcr")

    t = torch.full((3,), float(rank + 1))
    refuses("backend= on the default (gloo) group",
            lambda: mt.all_reduce(t, backend="gloo"), ValueError,
            "backend='gloo'", "runs on 'gloo'", "new_group")
    same(t, torch.full((3,), float(rank + 1)), "a refused call left its tensor as it was")
    mt.all_reduce(t, group=world, backend="gloo")
    same(t, torch.full((3,), float(ws * (ws + 1) // 2)), "all_reduce on the mcr group, gloo forced")
    only0 = dist.new_group([0], backend="mcr")
    u = torch.full((2,), float(rank + 1))
    mt.all_reduce(u, group=only0, backend="gloo")  # rank 1 is outside: nothing runs there
    same(u, torch.full((2,), float(rank + 1)), "all_reduce on a group of one")
    if rank != 0:
        refuses("set_timeout on a non-member", lambda: mt.set_timeout(timedelta(seconds=60), only0),
                ValueError, "not a member")
        refuses("explain on a non-member", lambda: mt.explain("all_reduce", 8, group=only0),
                ValueError, "not a member")
    else:
        mt.set_timeout(timedelta(seconds=60), only0)

    mixed = dist.new_group(backend="cpu:gloo,cuda:mcr")
    refuses("barrier(backend=) on a cpu:gloo,cuda:mcr group",
            lambda: mt.barrier(group=mixed, backend="gloo"), ValueError, "backend='gloo'",
            "for cpu tensors")
    mt.barrier(group=world, backend="gloo")

    refuses("backend=2", lambda: mt.all_reduce(t, group=world, backend=2), TypeError,
            "name = 2", "str")
    before = _C.backend_override()
    with mt.backend("mpi"):
        check(_C.backend_override() == "mpi", "the block after a refused name forces its own")
    check(_C.backend_override() == before,
          f"after the block the override is {_C.backend_override()!r}, not {before!r}")

    refuses("explain(reduce_op='max')",
            lambda: mt.explain("all_reduce", 8, reduce_op="max", group=world), ValueError,
            "reduce_op = 'max'")
    refuses("explain without a size", lambda: mt.explain("all_reduce", group=world), ValueError,
            "needs nbytes")
    check(mt.explain("all_reduce", 8, reduce_op=mt.ReduceOp.MAX, group=world)["backend"],
          "explain with ReduceOp.MAX")
    check(mt.explain("barrier", group=world)["backend"], "explain(barrier) needs no size")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(mt.get_global_rank(world, rank) == rank, "get_global_rank")
    deprecated = [w for w in caught if issubclass(w.category, FutureWarning)]
    check(not deprecated, f"get_global_rank warned: {[str(w.message) for w in deprecated]}")

    # A default group that renumbers the ranks is refused on every rank at once; one that keeps
    # them works.
    dist.destroy_process_group()
    os.environ["RANK"] = str(ws - 1 - rank)
    refuses("a default group that renumbers the ranks",
            lambda: dist.init_process_group("mcr", timeout=timedelta(seconds=120)), RuntimeError,
            f"rank {ws - 1 - rank} of {ws}", f"as rank {rank} of {ws}")
    check(not dist.is_initialized(), "a refused default group left torch.distributed initialised")
    os.environ["RANK"] = str(rank)
    dist.init_process_group("mcr", timeout=timedelta(seconds=120))
    t = torch.full((2,), float(rank))
    dist.all_reduce(t)
    same(t, torch.full((2,), float(ws * (ws - 1) // 2)), "all_reduce on a default group kept")
    finish("test_api_checks")


if __name__ == "__main__":
    main()
