"""A peer that stops answering in the middle of training, under the torch backend "mcr": every
survivor's operation raises in Python within MCR_TIMEOUT (the group keeps torch's default timeout of
30 minutes, so only MCR_TIMEOUT can bound it), with a message naming this rank and the rank behind.

    freeze: the last rank stops itself (SIGSTOP: no connection closes, as for a hung host)
    kill:   the last rank kills itself (SIGKILL: its connections close)

Rank 0 prints "test_peer_failure[MODE]: OK" when every survivor saw what it must; the job itself
then ends the way a failed job ends (the launcher tears it down), so the test is judged by that
line. Under torchrun the launcher must not tear the job down before the survivors have reported:
the test runs it with --monitor-interval above MCR_TIMEOUT. Run with MCR_TIMEOUT=3, 2 or 3 ranks,
argv[1] = freeze | kill."""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from common import setup

LIMIT_S = float(os.environ.get("MCR_TIMEOUT", "3"))


def main():
    mode = sys.argv[1]
    rank, ws = setup()  # torch's group timeout: 120 s here, far above MCR_TIMEOUT
    victim = ws - 1
    pids = [None] * ws
    dist.all_gather_object(pids, os.getpid())
    t = torch.ones(1 << 10)
    for _ in range(3):  # a few good steps first
        dist.all_reduce(t)
    if rank == victim:
        os.kill(os.getpid(), signal.SIGSTOP if mode == "freeze" else signal.SIGKILL)
        time.sleep(600)  # not reached: stopped or killed
    began = time.time()
    verdict = "FAIL"
    try:
        dist.all_reduce(t)
        why = "the all_reduce completed without the stopped peer"
    except RuntimeError as e:
        took = time.time() - began
        msg = str(e)
        print(f"rank {rank}: raised after {took:.1f} s: {type(e).__name__}: {msg}", flush=True)
        if took > LIMIT_S + 4:
            why = f"raised after {took:.1f} s, MCR_TIMEOUT is {LIMIT_S} s"
        elif mode == "freeze" and f"ranks that have not reached" not in msg:
            why = f"the message does not say which rank is behind: {msg}"
        elif mode == "freeze" and f"world rank {victim}" not in msg:
            why = f"the message does not name rank {victim}: {msg}"
        elif f"rank {rank}" not in msg:
            why = f"the message does not name this rank: {msg}"
        else:
            verdict, why = "OK", f"{took:.1f} s"
    print(f"rank {rank}: {verdict}: {why}", flush=True)
    if rank == 0 and verdict == "OK":
        print(f"test_peer_failure[{mode}]: OK", flush=True)
    # The stopped peer never exits by itself: end it, so the launcher ends the job. Rank 0 first
    # gives the other survivors time to raise and report: their messages read the peers' progress
    # from the store, which lives in rank 0's process (a survivor timing out a few ms after rank 0
    # had left found the store closed, and said so instead of naming the rank behind: 1 run in 6
    # under mpirun). A survivor that leaves first makes the launcher end the job; rank 0 has
    # printed its verdict by then.
    if rank == 0:
        time.sleep(2.0)
        try:
            os.kill(pids[victim], signal.SIGKILL)
        except ProcessLookupError:  # killed itself and already reaped by the launcher
            pass
    sys.stdout.flush()
    os._exit(0 if verdict == "OK" else 1)


if __name__ == "__main__":
    main()
