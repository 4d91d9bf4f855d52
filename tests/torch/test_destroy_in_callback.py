"""destroy_process_group(g) and completion callbacks (`.then()`) of g's operations. A group waits
for its operations in flight before it closes, and a Work completes only after the callbacks
chained on its future have run. Cases, every sum checked against the ranks' values (the test's
own timeout bounds a hang):

- destroy_process_group(g) inside the callback of g's own all_reduce, alone and with a second
  all_reduce of g still to complete: the group does not wait for the Work whose callbacks this
  thread runs, and waits for the second one. Rank 1 posts only once rank 0 has chained its
  callback (through the store), so rank 0's callback runs when the operation completes, on
  another thread than the main one (checked).
- destroy_process_group(g) on the main thread while a callback of g's all_reduce runs on another
  thread and then posts on g: the group waits for that Work, so the callback's post is accepted
  and sums right.

Run with 2 ranks."""

import threading
import time

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from common import check, finish, same, setup

_round = [0]


def ordered(rank, post):
    """Rank 0 posts and chains its callback first; the others post once it has (store). Run with
    MCR_VERIFY=0: cross-rank verification makes the first call of each signature wait at issue
    until every rank has issued it (docs/design.md), which this order would make wait for ever."""
    _round[0] += 1
    key = f"test_destroy_in_callback/{_round[0]}"
    store = c10d._get_default_store()
    if rank == 0:
        out = post()
        store.set(key, "chained")
    else:
        store.wait([key])
        out = post()
    return out


def destroy_in_callback(rank, ws, second):
    g = dist.new_group(list(range(ws)))
    t = torch.full((4,), float(rank + 1))
    total = float(sum(r + 1 for r in range(ws)))
    big = torch.full((1 << 20,), float(rank + 1))  # 4 MiB, not waited for before the callback
    ran_on = []

    def callback(fut):
        ran_on.append(threading.get_ident())
        dist.destroy_process_group(g)
        return fut.value()

    def post():
        work = dist.all_reduce(t, group=g, async_op=True)
        later = dist.all_reduce(big, group=g, async_op=True) if second else None
        return work.get_future().then(callback), later

    start = time.monotonic()
    chained, later = ordered(rank, post)
    chained.wait()
    took = time.monotonic() - start
    check(len(ran_on) == 1, "the callback did not run once")
    if rank == 0:
        check(ran_on[0] != threading.get_ident(),
              "rank 0's callback ran on the main thread: the case is not the one meant")
    same(t, torch.full((4,), total), "the all_reduce whose callback destroyed its group")
    if second:
        later.wait()
        same(big, torch.full((1 << 20,), total), "the group's second all_reduce")
    if rank == 0:
        print(f"destroy_process_group in a callback (second op: {second}): {took:.3f} s",
              flush=True)


def destroy_while_callback_posts(rank, ws):
    g = dist.new_group(list(range(ws)))
    t = torch.full((4,), float(rank + 1))
    x = torch.full((4,), float(10 * (rank + 1)))
    started = threading.Event()

    def callback(fut):
        started.set()
        time.sleep(0.3)  # destroy_process_group is called meanwhile
        # The ProcessGroup itself: destroy_process_group has removed g from torch's tables.
        g.allreduce([x]).wait()
        return fut.value()

    chained = ordered(rank, lambda: dist.all_reduce(t, group=g, async_op=True).get_future()
                      .then(callback))
    if rank == 0:
        check(started.wait(60), "the callback did not start")
        dist.destroy_process_group(g)
    chained.wait()
    if rank != 0:
        dist.destroy_process_group(g)
    same(t, torch.full((4,), float(sum(r + 1 for r in range(ws)))), "the callback's all_reduce")
    same(x, torch.full((4,), float(sum(10 * (r + 1) for r in range(ws)))),
         "the all_reduce a callback posted while its group was being destroyed")


def main():
    rank, ws = setup()
    destroy_in_callback(rank, ws, second=False)
    destroy_in_callback(rank, ws, second=True)
    destroy_while_callback_posts(rank, ws)
    finish("test_destroy_in_callback")


if __name__ == "__main__":
    main()
