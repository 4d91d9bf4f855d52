"""An all_reduce that times out while its peer is late, then the peer arrives (2 ranks, mpirun, MPI).

The timed-out MPI operation cannot be recalled: when rank 1 arrives 2.5 s late, it completes
against rank 0's request, which writes the result into rank 0's tensor. That tensor must still be
the operation's, even though rank 0 has dropped every reference to it. The runtime keeps freed
memory on the heap for reuse (MCR_MALLOC_RETAIN), so a tensor freed with the caller's references
is handed out again: the late result then lands in canaries allocated after the timeout, or
corrupts the heap (a crash)."""

import gc
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch as mt
from common import check, finish, setup

N = 1 << 20  # 4 MiB of float32
CANARY = 7.0


def main():
    rank, ws = setup()
    check(ws == 2, "needs 2 ranks")
    g = dist.new_group(backend="mcr", timeout=timedelta(seconds=1))
    # The first call of the signature is verified; the one that times out below is not, so that
    # the MPI operation itself is left in flight.
    t = torch.ones(N)
    mt.all_reduce(t, group=g, backend="mpi")
    canaries = []
    if rank == 0:
        t = torch.ones(N)
        try:
            mt.all_reduce(t, group=g, backend="mpi")  # rank 1 is 2.5 s late
            check(False, "the all_reduce completed without rank 1")
        except RuntimeError as e:
            print(f"rank 0 timed out as expected: {str(e)[:120]}", flush=True)
        # The caller's last references, the group's among them (an application drops a failed
        # group): the operation must keep the memory itself.
        dist.destroy_process_group(g)
        del t
        gc.collect()
        canaries = [torch.full((N,), CANARY) for _ in range(4)]
    else:
        time.sleep(2.5)
        t = torch.ones(N)
        try:
            mt.all_reduce(t, group=g, backend="mpi")  # completes against rank 0's request
        except RuntimeError as e:
            print(f"rank 1: {str(e)[:120]}", flush=True)
    # On MPI, so that MPI progresses rank 0's request meanwhile: rank 1's arrival completes it.
    mt.all_reduce(torch.ones(1), backend="mpi")
    for i, c in enumerate(canaries):
        changed = int((c != CANARY).sum())
        check(changed == 0, f"canary {i}: {changed} elements changed: the late all_reduce wrote "
                            "into memory freed with the caller's tensor")
    finish("test_late_peer")


if __name__ == "__main__":
    main()
