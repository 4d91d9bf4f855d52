"""init_process_group("mcr", timeout=...) bounds the world's formation, as it bounds torch's own
backends: under torchrun rank 1 arrives 12 s late and init_process_group's timeout is 3 s, so rank 0
raises within a few seconds (the runtime formed the world with its own default, 10 minutes, and
then completed it when rank 1 came). Judged by rank 0's line; a rank printing FAIL fails the test.
With `caps`, the timeouts the world and a later group take under MCR_TIMEOUT."""

import os
import sys
import time
from datetime import timedelta

import torch.distributed as dist

import mcr.torch


def caps():
    """With MCR_TIMEOUT=3600: the world takes init_process_group's 60 s, and a later group's 2 h is
    capped by MCR_TIMEOUT (3600 s), not by the world's 60 s."""
    rank = int(os.environ["RANK"])
    dist.init_process_group("mcr", timeout=timedelta(seconds=60))
    world = mcr.torch._backend.backend_of().timeout
    g = dist.new_group(list(range(dist.get_world_size())), timeout=timedelta(hours=2))
    group = mcr.torch._backend.backend_of(g).timeout
    if world != timedelta(seconds=60) or group != timedelta(seconds=3600):
        print(f"rank {rank}: FAIL: timeouts {world} (world, 60 s expected) and {group} (group of "
              f"2 h under MCR_TIMEOUT=3600, 3600 s expected)", flush=True)
    else:
        print(f"rank {rank}: timeouts {world} and {group}", flush=True)
    dist.destroy_process_group()


def main():
    if "caps" in sys.argv[1:]:
        caps()
        return
    rank = int(os.environ["RANK"])
    if rank == 1:
        time.sleep(12)
    began = time.monotonic()
    try:
        dist.init_process_group("mcr", timeout=timedelta(seconds=3))
    except Exception as e:  # noqa: BLE001 - the peer is late: an error is the right outcome
        took = time.monotonic() - began
        # Rank 0 must fail because rank 1 did not come within the 3 s, not for another reason.
        # Rank 1 comes after rank 0 has given up; it fails too, and is not judged.
        if rank == 0 and not (2.5 <= took <= 9 and "3000 ms" in str(e)):
            print(f"rank 0: FAIL: init_process_group raised after {took:.1f} s, not as the 3 s "
                  f"timeout: {e}", flush=True)
            return
        print(f"rank {rank}: init_process_group raised after {took:.1f} s: {e}", flush=True)
        return
    if rank == 0:
        print("rank 0: FAIL: init_process_group waited for a rank 12 s late with a 3 s timeout",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
