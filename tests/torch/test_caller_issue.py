"""Operations posted while the communication thread is idle are issued by the posting thread, and
a thread that waits for an operation does the communication thread's work itself until it
completes, blocking in Gloo's own wait for a send or receive alone in flight
(src/torch/comm_thread.hpp); results and ordering are the same either way. argv[1]: "on" (the
default, MCR_TORCH_INLINE unset), "off" (MCR_TORCH_INLINE=0: every operation handed over; also
MCR_TORCH_CALLER_POLL_BYTES=1K), "bad" (MCR_TORCH_INLINE=yes: init_processes raises, naming the
variable) or "badpoll" (MCR_TORCH_CALLER_POLL_BYTES=lots: the same). Run with 2 ranks."""

import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch as mt
from common import check, comm_thread_counts as counts, data, finish, same, setup, wait_for_count


def sync_calls_on_two_threads(rank, ws):
    """Two threads, each calling synchronous all_reduces on a group of its own, reach them in
    different orders on the two ranks (a checkpointing thread's collectives beside the training
    loop's). The call a rank issues first must not keep the other thread's call from being issued:
    each rank would then wait for a peer whose call is queued behind its own, both until the
    groups' timeout (20 s here)."""
    groups = [dist.new_group(list(range(ws)), timeout=timedelta(seconds=20)) for _ in range(2)]
    # Two threads of their own; then this thread (which brought mcr up: its synchronous calls poll
    # their operation alone until another thread posts) and one other.
    for name, main_calls in (("mpi", False), ("gloo", False), ("mpi", True), ("gloo", True)):
        with mt.backend(name):
            # The same calls once in one order first: the first call of a signature is verified
            # across the ranks (MCR_VERIFY), which waits for every rank before it starts.
            for g in groups:
                dist.all_reduce(torch.ones(4), group=g)
            results, errors = {}, []

            def worker(k):
                time.sleep(0.3 if (rank == 0) == (k == 1) else 0.0)  # rank 0: group 0 first
                t = torch.full((4,), float(rank + k))
                try:
                    dist.all_reduce(t, group=groups[k])
                    results[k] = t
                except Exception as e:  # noqa: BLE001 - reported below, with the thread's group
                    errors.append(f"group {k}: {e}")

            threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
            for t in threads[1:] if main_calls else threads:
                t.start()
            if main_calls:
                worker(0)
            for t in threads[1:] if main_calls else threads:
                t.join()
            how = "this thread and another" if main_calls else "two threads"
            check(not errors, f"{name}: synchronous calls from {how} failed: {errors}")
            for k in (0, 1):
                same(results[k], torch.full((4,), float(sum(r + k for r in range(ws)))),
                     f"{name}, {how}: group {k}'s all_reduce from its own thread")
    for g in groups:
        dist.destroy_process_group(g)


def helper_send_beside_main_collective(rank, ws):
    """This thread (which brought mcr up: its synchronous calls are issued and polled by itself)
    calls an all_reduce on rank 0 while a helper thread of rank 0 sends rank 1 what rank 1 must
    receive before it joins that all_reduce. The helper's send, posted while this thread waits,
    must be issued meanwhile: waiting for the all_reduce alone held it back, and both ranks
    waited until the group's timeout (20 s here)."""
    g = dist.new_group(list(range(ws)), timeout=timedelta(seconds=20))
    for name in ("mpi", "gloo"):
        with mt.backend(name):
            dist.all_reduce(torch.ones(4), group=g)  # verified once across the ranks (MCR_VERIFY)
            t = torch.full((4,), float(rank + 1))
            start = time.monotonic()
            if rank == 0:
                errors = []
                posted = counts()["posted"]

                def helper():
                    # After this thread has posted its all_reduce and is waiting in it.
                    wait_for_count("posted", posted, 10)
                    time.sleep(0.2)
                    try:
                        dist.send(torch.arange(8, dtype=torch.int64) + 5, dst=1, group=g)
                    except Exception as e:  # noqa: BLE001 - reported below
                        errors.append(str(e))

                th = threading.Thread(target=helper)
                th.start()
                dist.all_reduce(t, group=g)
                th.join()
                check(not errors, f"{name}: the helper's send failed: {errors}")
            elif rank == 1:
                got = torch.zeros(8, dtype=torch.int64)
                dist.recv(got, src=0, group=g)
                same(got, torch.arange(8, dtype=torch.int64) + 5, f"{name}: the helper's message")
                dist.all_reduce(t, group=g)
            else:
                dist.all_reduce(t, group=g)
            took = time.monotonic() - start
            same(t, torch.full((4,), float(sum(r + 1 for r in range(ws)))),
                 f"{name}: all_reduce beside a helper thread's send")
            check(took < 10, f"{name}: the all_reduce beside a helper's send took {took:.1f} s")
    dist.destroy_process_group(g)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "on"
    if mode == "off":
        os.environ["MCR_TORCH_INLINE"] = "0"
        os.environ["MCR_TORCH_CALLER_POLL_BYTES"] = "1K"
    bad = {"bad": ("MCR_TORCH_INLINE", "yes", "must be 1"),
           "badpoll": ("MCR_TORCH_CALLER_POLL_BYTES", "lots", "not a byte count")}
    if mode in bad:
        var, value, rule = bad[mode]
        os.environ[var] = value
        try:
            setup()
            check(False, f"{var}={value} was accepted")
        except RuntimeError as e:
            check(f"{var}='{value}'" in str(e) and rule in str(e), f"message: {e}")
        print(f"test_caller_issue[{mode}]: OK", flush=True)
        return
    rank, ws = setup()
    before = counts()

    # Who polls an asynchronous operation it issued itself, and for how long: only on a host with
    # a core to spare, and only an operation small enough to finish within the poll (64 KiB by
    # default); a larger one would only hold up its caller (DDP's backward pass).
    poll_us, limit = mt._backend._C.caller_poll_us, 1024 if mode == "off" else 65536
    check(poll_us(True, limit) == 50, f"{limit} bytes with a core to spare: {poll_us(True, limit)}")
    check(poll_us(True, limit + 1) == 0, f"{limit + 1} bytes: polled {poll_us(True, limit + 1)} us")
    check(poll_us(False, 4) == 0, f"4 bytes on shared cores: polled {poll_us(False, 4)} us")

    # Back-to-back synchronous calls: the thread is idle before each, so each may be issued here.
    n_sync = 300
    for i in range(n_sync):
        t = torch.full((1,), float(rank + i))
        dist.all_reduce(t)
        check(t.item() == sum(r + i for r in range(ws)), f"sync all_reduce {i}: {t.item()}")

    # Many in flight, then mixed with point-to-point: later posts queue behind the ones in flight,
    # and every rank still sees the same order.
    outs = [data(rank, 4097, torch.float32, salt=k) for k in range(24)]
    works = [dist.all_reduce(t, async_op=True) for t in outs]
    nxt, prev = (rank + 1) % ws, (rank - 1) % ws
    got = torch.zeros(1000, dtype=torch.int64)
    mine = torch.arange(1000, dtype=torch.int64) + rank
    if rank == 0:
        r = dist.irecv(got, src=prev)
        s = dist.isend(mine, dst=nxt)
    else:
        s = dist.isend(mine, dst=nxt)
        r = dist.irecv(got, src=prev)
    tail = torch.full((3,), float(rank))
    dist.all_reduce(tail)
    for w in works + [r, s]:
        w.wait()
    for k, t in enumerate(outs):
        want = sum(data(q, 4097, torch.float32, salt=k) for q in range(ws))
        check(torch.equal(t, want), f"async all_reduce {k} differs")
    check(torch.equal(got, torch.arange(1000, dtype=torch.int64) + prev), "recv data")
    check(torch.equal(tail, torch.full((3,), float(sum(range(ws))))), "all_reduce after p2p")

    # Waits for a receive whose sender is late, on Gloo (whose completions wake a sleeping thread):
    # the communication thread sleeps without the right to call mcr, so the waiter takes it and
    # does the work; completions, later posts and the data stay right.
    rounds, late_s = 20, 0.02
    with mt.backend("gloo"):
        for i in range(rounds):
            if rank == 0:
                buf = torch.zeros(257, dtype=torch.float64)
                w = dist.irecv(buf, src=1)
                w.wait()
                check(torch.equal(buf, torch.arange(257, dtype=torch.float64) * (i + 1)),
                      f"late recv {i}")
            elif rank == 1:
                time.sleep(late_s)
                dist.send(torch.arange(257, dtype=torch.float64) * (i + 1), dst=0)
            t = torch.full((2,), float(rank * i))
            dist.all_reduce(t)
            check(torch.equal(t, torch.full((2,), float(sum(r * i for r in range(ws))))),
                  f"all_reduce after late recv {i}")

    # A receive that is polled (is_completed) or chained on (its future) instead of waited on: where
    # ranks share cores the poster parks it for a waiter that never comes (comm_thread.hpp), and
    # the poll or the future hands it to the communication thread, which completes it.
    with mt.backend("gloo"):
        for how in ("is_completed", "future"):
            if rank == 0:
                buf = torch.zeros(33, dtype=torch.float64)
                w = dist.irecv(buf, src=1)
                if how == "is_completed":
                    deadline = time.monotonic() + 30
                    while not w.is_completed():
                        check(time.monotonic() < deadline, "a polled irecv never completed")
                        time.sleep(0.001)
                else:
                    w.get_future().wait()
                check(torch.equal(buf, torch.arange(33, dtype=torch.float64) + 7), f"{how} recv")
            elif rank == 1:
                time.sleep(late_s)
                dist.send(torch.arange(33, dtype=torch.float64) + 7, dst=0)
            dist.barrier()

    sync_calls_on_two_threads(rank, ws)
    helper_send_beside_main_collective(rank, ws)

    after = counts()
    posted = after["posted"] - before["posted"]
    by_caller = after["issued_by_caller"] - before["issued_by_caller"]
    done_here = after["completed_by_caller"] - before["completed_by_caller"]
    driven = after["driven_by_waiter"] - before["driven_by_waiter"]
    in_gloo = after["waited_in_library"] - before["waited_in_library"]
    print(f"rank {rank} [{mode}]: {posted} posted, {by_caller} issued by the caller, "
          f"{done_here} also completed there, {driven} waits did the thread's work, "
          f"{in_gloo} of them in Gloo's own wait", flush=True)
    check(posted >= n_sync + 24 + 3, f"only {posted} operations counted as posted")
    check(done_here <= by_caller <= posted, f"counts out of order: {after}")
    if mode == "off":
        check(by_caller == 0, f"MCR_TORCH_INLINE=0, yet {by_caller} were issued by the caller")
        check(driven == 0, f"MCR_TORCH_INLINE=0, yet {driven} waits did the thread's work")
        check(in_gloo == 0, f"MCR_TORCH_INLINE=0, yet {in_gloo} waits were made in Gloo's")
    else:
        # Between two synchronous calls the communication thread has nothing to do, so the next
        # post finds it idle; only a thread still finishing the previous call makes it hand over.
        check(by_caller >= n_sync // 10, f"only {by_caller} of {n_sync} idle posts issued here")
        # Rank 0 waits 20 ms for each late message, nearly all of it with the communication
        # thread asleep (it wakes every 10 ms for a few microseconds).
        if rank == 0:
            check(driven >= rounds // 2, f"only {driven} of {rounds} late receives' waits did "
                  "the thread's work")
            # ... and each such wait, the receive alone in flight, blocks in Gloo's own wait.
            check(in_gloo >= rounds // 2, f"only {in_gloo} of {rounds} late receives' waits were "
                  "made in Gloo's own wait")
    finish(f"test_caller_issue[{mode}]")


if __name__ == "__main__":
    main()
