"""destroy_process_group(g) called from a completion callback (`.then()`) of g's own operation, as
teardown or error handling in a hook may do: the group waits for its operations in flight before
it closes, and the operation whose callback runs is over (its future is filled) though its Work
completes only after that callback returns. Before, the group waited for that Work, that is for
itself, for ever. Cases: the callback's operation alone; and with a second operation of the group
still to complete, which the group waits for and which sums right. Every sum is checked against
the ranks' values; the test's own timeout bounds a hang. Run with 2 ranks."""

import time

import torch
import torch.distributed as dist

from common import check, finish, same, setup


def destroy_in_callback(rank, ws, second):
    g = dist.new_group(list(range(ws)))
    t = torch.full((4,), float(rank + 1))
    want = torch.full((4,), float(sum(r + 1 for r in range(ws))))
    work = dist.all_reduce(t, group=g, async_op=True)
    big = None
    if second:
        # 4 MiB, posted after the first and not waited for before the callback destroys the group.
        big = torch.full((1 << 20,), float(rank + 1))
        later = dist.all_reduce(big, group=g, async_op=True)
    destroyed = []

    def callback(fut):
        dist.destroy_process_group(g)
        destroyed.append(True)
        return fut.value()

    start = time.monotonic()
    chained = work.get_future().then(callback)
    chained.wait()
    took = time.monotonic() - start
    check(destroyed == [True], "the callback did not destroy the group")
    same(t, want, "the all_reduce whose callback destroyed its group")
    if second:
        later.wait()
        same(big, torch.full((1 << 20,), want[0].item()), "the group's second all_reduce")
    if rank == 0:
        print(f"destroy_process_group in a callback (second op: {second}): {took:.3f} s", flush=True)


def main():
    rank, ws = setup()
    destroy_in_callback(rank, ws, second=False)
    destroy_in_callback(rank, ws, second=True)
    finish("test_destroy_in_callback")


if __name__ == "__main__":
    main()
