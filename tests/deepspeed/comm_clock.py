"""examples/deepspeed's communication clock counts each call once: torch's send waits on its own
isend and recv on irecv, both of which the clock wraps too. Rank 0 sends 0.6 s late; rank 1's
recv, synchronous and asynchronous, must count about 0.6 s, not twice that. 2 ranks, torch gloo."""

import sys
import time

import torch
import torch.distributed as dist

import mcr.torch as mt
from train import CommClock

LATE_S = 0.6


def main():
    mt.init_processes("gloo")
    rank = dist.get_rank()
    clock = CommClock()
    clock.install()
    t = torch.zeros(8)
    counted = {}
    for how in ("sync", "async"):
        dist.barrier()  # timed too: read the clock after it
        before = clock.seconds
        if rank == 0:
            time.sleep(LATE_S)
            dist.send(torch.ones(8), dst=1)
        elif how == "sync":
            dist.recv(t, src=0)
        else:
            dist.irecv(t, src=0).wait()
        counted[how] = clock.seconds - before
    dist.barrier()
    if rank == 1:
        print(f"rank 1 counted {counted} for a send {LATE_S} s late", flush=True)
        for how, s in counted.items():
            # The upper bound is the check (counted twice, it is 2 x LATE_S); the lower one allows
            # for the ranks leaving the barrier apart on loaded cores.
            if not 0.5 * LATE_S <= s <= 1.5 * LATE_S:
                sys.exit(f"FAIL: {how} recv counted {s:.3f} s of communication, expected about "
                         f"{LATE_S} s")
    dist.destroy_process_group()
    if rank == 0:
        print("comm clock: OK", flush=True)


if __name__ == "__main__":
    main()
