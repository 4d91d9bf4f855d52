"""init_process_group("mcr", timeout=...) bounds the world's formation, as it bounds torch's own
backends: under torchrun rank 1 arrives 12 s late and init_process_group's timeout is 3 s, so rank 0
raises within a few seconds (the runtime formed the world with its own default, 10 minutes, and
then completed it when rank 1 came). Judged by rank 0's line; a rank printing FAIL fails the test."""

import os
import time
from datetime import timedelta

import torch.distributed as dist

import mcr.torch  # noqa: F401 - registers the backend


def main():
    rank = int(os.environ["RANK"])
    if rank == 1:
        time.sleep(12)
    began = time.monotonic()
    try:
        dist.init_process_group("mcr", timeout=timedelta(seconds=3))
    except Exception as e:  # noqa: BLE001 - the peer is late: an error is the right outcome
        took = time.monotonic() - began
        print(f"rank {rank}: init_process_group raised after {took:.1f} s: {e}", flush=True)
        if took > 9:
            print(f"rank {rank}: FAIL: the 3 s timeout took {took:.1f} s", flush=True)
        return
    if rank == 0:
        print("rank 0: FAIL: init_process_group waited for a rank 12 s late with a 3 s timeout",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
