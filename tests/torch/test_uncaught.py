"""An uncaught exception on one rank ends the whole job at once under the torch backend "mcr".

Rank 0 raises after a good all_reduce; the other ranks then wait for it in a barrier. Run with
MCR_TIMEOUT far above the test's own limit: without mcr's excepthook, rank 0's exit handler waits
for its peers in finalize and they wait for it in the barrier, each for the whole MCR_TIMEOUT. With
it, rank 0's finalize waits for nobody (its Gloo connections close, MPI is left to the launcher),
and the launcher (mpirun, torchrun) ends the job when rank 0 exits. Judged by rank 0's line, by the
job ending within the test's limit, and by no rank printing FAIL.

With `pending`, rank 0 first posts a receive that rank 1 never matches: its exit handler must not
wait for it (destroying the groups waits for their operations in flight, here for the whole
MCR_TIMEOUT), so the communication thread stops at once and finalize abandons the receive.

With `waiting`, a daemon thread of rank 0 waits in an all_reduce on a group that rank 1 never
joins: a waiting thread does the communication thread's work and holds the right to call mcr, and
the exit handler must not wait for it to let go (it held it until the group's timeout). With
`verifying`, the daemon thread's all_reduce is the first of its kind on that group, which the
ranks verify together before it starts (MCR_VERIFY): the thread waits in that exchange instead, and
the exit handler must not wait for it either. With `receiving`, the daemon thread waits in a
blocking receive that rank 1 never matches (under torchrun, in Gloo's own wait). With `exit`, rank
0 leaves with sys.exit(1) instead of raising: Python runs no excepthook for it."""

import sys
import threading
import time

import torch
import torch.distributed as dist

from common import comm_thread_counts as counts, setup, wait_for_count


def main():
    rank, ws = setup()
    t = torch.ones(16)
    dist.all_reduce(t)
    verifying = "verifying" in sys.argv[1:]
    receiving = "receiving" in sys.argv[1:]
    waiting = "waiting" in sys.argv[1:] or verifying or receiving
    g = dist.new_group(list(range(ws))) if waiting else None
    if waiting:  # once on every rank: the first call of a signature is verified across the ranks
        dist.all_reduce(torch.ones(4), group=g)
    if rank == 0:
        if "pending" in sys.argv[1:]:
            dist.irecv(torch.empty(4), src=1)  # never matched: rank 1 sends nothing
        if waiting:
            posted, driven = counts()["posted"], counts()["driven_by_waiter"]
            if receiving:  # never matched: rank 1 sends nothing
                threading.Thread(target=dist.recv, args=(torch.empty(4),), kwargs={"src": 1},
                                 daemon=True).start()
            else:  # a count not seen before on g is verified across the ranks first; 4 was, above
                threading.Thread(target=dist.all_reduce, args=(torch.ones(5 if verifying else 4),),
                                 kwargs={"group": g}, daemon=True).start()
            if not wait_for_count("posted", posted, 10):
                print("rank 0: FAIL: the thread did not post its operation", flush=True)
            # Waiting, the thread usually goes on to do the work itself (a waiter); sometimes the
            # communication thread polls the operation instead. Either must let go at exit.
            if not verifying and not receiving:
                wait_for_count("driven_by_waiter", driven, 2)
            time.sleep(0.2)
        print(f"test_uncaught: rank 0 raises with {ws - 1} peers waiting", flush=True)
        if "exit" in sys.argv[1:]:
            sys.exit(1)
        raise RuntimeError("test_uncaught: raised on purpose")
    began = time.time()
    try:
        dist.barrier()
    except Exception as e:  # noqa: BLE001 - rank 0 is gone: an error is the right outcome
        print(f"rank {rank}: barrier raised after {time.time() - began:.1f} s: {e}", flush=True)
        raise
    print(f"rank {rank}: FAIL: the barrier completed without rank 0", flush=True)


if __name__ == "__main__":
    main()
