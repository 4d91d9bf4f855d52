"""A collective that a peer never joins raises a timeout exception naming the operation, and the
group is unusable afterwards (a peer may still be inside the timed-out operation). Other groups keep
working. Run with 2 ranks; argv[1] is the backend to force ("gloo" or "mpi")."""

import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch as mt
from common import check, finish, setup


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
    rank, ws = setup()
    g = dist.new_group(backend="mcr", timeout=timedelta(seconds=3))
    t = torch.ones(4)
    mt.all_reduce(t, group=g, backend=backend)  # the group works before the failure
    if rank == 0:
        began = time.time()
        try:
            mt.all_reduce(t, group=g, backend=backend)  # rank 1 never joins this one
            check(False, "all_reduce without a peer did not raise")
        except RuntimeError as e:
            took = time.time() - began
            print(f"raised after {took:.1f} s: {type(e).__name__}: {e}", flush=True)
            check(isinstance(e, mt._backend._C.TimeoutError) or "timed out" in str(e).lower()
                  or "did not complete" in str(e), f"not a timeout: {e}")
            check("all_reduce" in str(e), f"message does not name the operation: {e}")
            # As the C++ runtime's: this rank, and the rank that never arrived.
            check("rank 0 of group" in str(e), f"message does not name this rank: {e}")
            check("ranks that have not reached sequence #1: 1 (world rank 1" in str(e),
                  f"message does not name the laggard: {e}")
            check(2.5 < took < 30, f"raised after {took:.1f} s, the timeout is 3 s")
        try:
            mt.all_reduce(t, group=g, backend=backend)
            check(False, "the aborted group accepted another operation")
        except RuntimeError as e:
            check("abort" in str(e).lower(), f"second call: {e}")
    dist.barrier()  # the world group is unaffected
    finish(f"test_timeout[{backend}]")


if __name__ == "__main__":
    main()
