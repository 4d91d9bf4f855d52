"""mcr.torch.shutdown() while work is in flight (src/torch/comm_thread.hpp): an operation that a
completion callback posts during the drain is still issued and completes with the right values
before the runtime finalizes; operations posted after shutdown fail with an error that says so, and
never wait forever. Run with 2 ranks."""

import sys
import threading

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

import mcr.torch as mt
from common import setup


def main():
    rank, ws = setup()

    def check(cond, what):
        if not cond:
            raise AssertionError(f"rank {rank}: {what}")

    # Kept past destroy_process_group (shutdown's first step), so the callback and the later post
    # still reach mcr's process group.
    pg = c10d._get_default_group()
    dist.barrier()

    # 16 MiB: far longer than the 50 µs a posting thread polls, so the operation is still in flight
    # when the callback is attached and when shutdown starts; the callback then runs on the
    # communication thread while it drains.
    big = torch.full((1 << 22,), float(rank + 1))
    first = pg.allreduce([big])
    chained = torch.full((5,), float(10 * (rank + 1)))
    seen = {}

    def post_next(fut):
        seen["thread"] = threading.get_ident()
        seen["work"] = pg.allreduce([chained])
        return fut.value()

    done = first.get_future().then(post_next)
    mt.shutdown()

    check(done.done(), "the first operation's callback had not run when shutdown returned")
    if seen["thread"] == threading.get_ident():
        print(f"rank {rank}: note: the first all_reduce completed before shutdown; the chained "
              f"operation was posted by this thread", flush=True)
    check(seen["work"].is_completed(),
          "an operation posted by a completion callback during shutdown was never issued")
    seen["work"].wait()
    want = float(sum(10 * (r + 1) for r in range(ws)))
    check(torch.equal(chained, torch.full((5,), want)), f"chained all_reduce: {chained.tolist()}")
    check(torch.equal(big[:4], torch.full((4,), float(sum(r + 1 for r in range(ws))))),
          f"first all_reduce: {big[:4].tolist()}")

    # After shutdown: an error naming the shutdown, at once.
    late = torch.ones(3)
    try:
        pg.allreduce([late]).wait()
        check(False, "an all_reduce posted after shutdown succeeded")
    except RuntimeError as e:
        check("has shut down" in str(e), f"message: {e}")
    # A refused PREMUL_SUM all_reduce leaves its tensor as it was: the factor is applied only to
    # an operation that is posted.
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist._make_nccl_premul_sum(3.0)
    try:
        pg.allreduce([late], opts).wait()
        check(False, "a PREMUL_SUM all_reduce posted after shutdown succeeded")
    except RuntimeError as e:
        check("has shut down" in str(e), f"message: {e}")
    check(torch.equal(late, torch.ones(3)), f"refused PREMUL_SUM changed its tensor: {late.tolist()}")
    mt.shutdown()  # idempotent
    if rank == 0:
        print("test_shutdown: OK", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
