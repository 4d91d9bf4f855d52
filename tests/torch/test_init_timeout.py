"""init_process_group("mcr", timeout=...) bounds the world's formation, as it bounds torch's own
backends: under torchrun rank 1 arrives 12 s late and init_process_group's timeout is 3 s, so rank 0
raises within a few seconds (the runtime formed the world with its own default, 10 minutes, and
then completed it when rank 1 came). Judged by rank 0's line; a rank printing FAIL fails the test.
With `caps`, the timeouts the world and a later group take under MCR_TIMEOUT, and those that
mcr.torch.set_timeout sets. With `retry`, init_process_group tried again after a timeout; with `reinit`, a new default
group after one whose operation timed out (`reinit mpi`: made by mcr.torch.init_processes under
mpirun)."""

import os
import sys
import tempfile
import time
from datetime import timedelta

import torch
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
    set_timeout(rank, g)
    dist.destroy_process_group()


def set_timeout(rank, g):
    """mcr.torch.set_timeout: capped by MCR_TIMEOUT as new_group's timeout is (before, 2 h stayed 2
    h), and the group's later operations wait the new timeout: rank 0's all_reduce on g, which rank
    1 never joins, times out after 2 s, not after the group's 3600 s."""
    mcr.torch.set_timeout(timedelta(hours=2), g)
    capped = mcr.torch._backend.backend_of(g).timeout
    if capped != timedelta(seconds=3600):
        print(f"rank {rank}: FAIL: set_timeout(2 h) under MCR_TIMEOUT=3600 gave {capped}", flush=True)
    mcr.torch.set_timeout(2, g)
    if rank == 0:
        began = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), group=g)
            print("rank 0: FAIL: an all_reduce that rank 1 never joins completed", flush=True)
        except Exception as e:  # noqa: BLE001 - the timeout is the expected outcome
            took = time.monotonic() - began
            if not (1.5 <= took <= 20 and "2000 ms" in str(e)):
                print(f"rank 0: FAIL: the all_reduce raised after {took:.1f} s, not as the 2 s "
                      f"timeout: {e}", flush=True)
            else:
                print(f"rank 0: the all_reduce timed out after {took:.1f} s", flush=True)
    dist.barrier()  # on the world: rank 1 stays until rank 0's all_reduce has timed out


def _marker():
    """A file both ranks of this launch name alike: rank 0 creates it once its first attempt has
    raised, and rank 1 starts only then, however long either took to import torch."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    return os.path.join(tempfile.gettempdir(), f"mcr_init_retry_{run}_{os.environ['MASTER_PORT']}")


def retry():
    """init_process_group tried again after it timed out, as with torch's own backends: rank 1
    starts after rank 0's first attempt (2 s) has raised, its own first attempt fails too, and both
    second attempts (60 s) form the world. Before, a second attempt raised at once, saying to call
    mcr::finalize(), a C++ function. Rank 0's first attempt raises after its 2 s."""
    rank = int(os.environ["RANK"])
    marker = _marker()
    if rank == 1:
        deadline = time.monotonic() + 40
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.exists(marker):
            print("rank 1: FAIL: rank 0's first attempt did not end within 40 s", flush=True)
            return
        os.unlink(marker)
    for attempt, seconds in enumerate((2, 60)):
        began = time.monotonic()
        try:
            dist.init_process_group("mcr", timeout=timedelta(seconds=seconds))
            break
        except Exception as e:  # noqa: BLE001 - the first attempt is meant to time out
            took = time.monotonic() - began
            print(f"rank {rank}: attempt {attempt} raised after {took:.1f} s: {e}", flush=True)
            if attempt == 1:
                print(f"rank {rank}: FAIL: init_process_group failed again", flush=True)
                return
            if rank == 0:
                if took > 3.9:
                    print(f"rank 0: FAIL: the first attempt raised after {took:.1f} s, not after "
                          f"its 2 s", flush=True)
                with open(marker, "w"):
                    pass
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    if t.tolist() != [3.0, 3.0, 3.0]:
        print(f"rank {rank}: FAIL: all_reduce gave {t.tolist()}, not [3, 3, 3]", flush=True)
    else:
        print(f"rank {rank}: formed at attempt {attempt}; all_reduce {t.tolist()}", flush=True)
    dist.destroy_process_group()


def reinit():
    """init_process_group after destroy_process_group, once an operation timed out, three times
    over: rank 0's all_reduce, which rank 1 never joins, times out (2 s) and aborts the default
    group (the world the first time, a group of its own later), while rank 1 goes on to the next
    init_process_group; each next default group must work, as with torch's own backends (an
    in-process restart after a fault). Before, the second default group was the aborted world:
    rank 0 raised "communicator aborted", rank 1 a connection closed."""
    ok = True
    for cycle in range(3):
        init()
        rank = dist.get_rank()
        if cycle > 0:
            ok &= check_all_reduce(rank, f"default group #{cycle}")
            if launched_by_mpi_or_srun():  # init_processes made torch's store a fresh one
                ok &= check_all_reduce(rank, f"a gloo group of default group #{cycle}",
                                       dist.new_group(backend="gloo"))
        mcr.torch.set_timeout(2)
        if rank == 0:
            try:
                dist.all_reduce(torch.ones(2))
                print("rank 0: FAIL: an all_reduce that rank 1 never joins completed", flush=True)
                ok = False
            except Exception as e:  # noqa: BLE001 - the timeout is the expected outcome
                print(f"rank 0: cycle {cycle} failed as meant: {str(e)[:80]}", flush=True)
        dist.destroy_process_group()
    init()
    ok &= check_all_reduce(rank, "default group #3")
    if ok:
        print(f"rank {rank}: every default group after a timeout worked", flush=True)
    dist.destroy_process_group()
    if not ok:  # judged by the exit status too: under srun the output is not matched
        sys.exit(1)


def launched_by_mpi_or_srun():
    """Whether init() goes through mcr.torch.init_processes, which gives every new default group
    a fresh torch store. Under torchrun the store is torchrun's own, where the previous groups'
    keys stay (a Gloo group made there after a re-init hung once in six runs)."""
    return "mpi" in sys.argv[1:] or "srun" in sys.argv[1:]


def init():
    """The default group as the launch makes it: under mpirun (`mpi`), mcr.torch.init_processes,
    which agrees on torch's store address over the world: after a timeout aborted it, over fresh
    connections (before, rank 0 raised "communicator aborted" and rank 1 waited in the agreement
    until its timeout)."""
    if launched_by_mpi_or_srun():
        mcr.torch.init_processes(timeout=timedelta(seconds=30))
    else:
        dist.init_process_group("mcr", timeout=timedelta(seconds=30))


def check_all_reduce(rank, what, group=None):
    t = torch.full((3,), float(rank + 1))
    try:
        dist.all_reduce(t, group=group)
    except Exception as e:  # noqa: BLE001 - reported as the failure it is
        print(f"rank {rank}: FAIL: all_reduce on {what} raised: {e}", flush=True)
        return False
    if t.tolist() != [3.0, 3.0, 3.0]:
        print(f"rank {rank}: FAIL: all_reduce on {what} gave {t.tolist()}, not [3, 3, 3]",
              flush=True)
        return False
    return True


def main():
    if "reinit" in sys.argv[1:]:
        reinit()
        return
    if "caps" in sys.argv[1:]:
        caps()
        return
    if "retry" in sys.argv[1:]:
        retry()
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
