"""Futures and hooks, subgroups (strided, non-members), torch.distributed.nn autograd operations,
the MCR-DL-style API with per-call backends and explain(), and argument errors surfacing as Python
exceptions with the runtime's message, and a group member that comes after the others gave up."""

import gc
import time
import warnings
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn as dnn

import mcr.torch as mt
from common import check, finish, same, setup


def futures(rank, ws):
    # A future completes although nobody waits on the work; then() callbacks run and chain.
    t = torch.full((5,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    deadline = time.time() + 30
    while not work.is_completed() and time.time() < deadline:
        time.sleep(0.001)
    check(work.is_completed(), "async all_reduce never completed without a wait")
    total = ws * (ws + 1) / 2
    same(t, torch.full((5,), total), "async all_reduce result")
    same(fut.wait(), torch.full((5,), 2 * total), "chained future")
    # Many in flight at once, waited in reverse order.
    ts = [torch.full((3,), float(rank + k)) for k in range(16)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in reversed(works):
        w.wait()
    for k, x in enumerate(ts):
        same(x, torch.full((3,), float(sum(r + k for r in range(ws)))), f"in-flight all_reduce {k}")


def outputs_released(rank, ws):
    """A completed operation's tensors are let go with its last Work: on a group that sees no
    further operation, nothing holds them (before, each group kept its last Work's outputs)."""
    group = dist.new_group(list(range(ws)))
    for async_op in (False, True):
        t = torch.ones(1 << 20)  # 4 MiB
        seen = weakref.ref(t)
        work = dist.all_reduce(t, group=group, async_op=async_op)
        if work is not None:
            work.wait()
        same(t[:4], torch.full((4,), float(ws)), "all_reduce on the group")
        del t, work
        gc.collect()
        check(seen() is None, f"a completed all_reduce (async_op={async_op})'s output is still held")
    dist.destroy_process_group(group)


def never_timing_out(rank, ws):
    """A group whose timeout is 200000 days (a program's "never"; torch itself overflows on
    timedelta.max), and a wait with it: the deadline is bounded (100 years) instead of
    overflowing the clock, which made every operation on the group time out at once."""
    never = timedelta(days=200000)
    group = dist.new_group(list(range(ws)), timeout=never)
    t = torch.ones(3)
    dist.all_reduce(t, group=group)
    same(t, torch.full((3,), float(ws)), "all_reduce on a group with a 200000-day timeout")
    work = dist.all_reduce(t, group=group, async_op=True)
    check(work.wait(timeout=never), "a wait with a 200000-day timeout")
    same(t, torch.full((3,), float(ws * ws)), "async all_reduce waited 200000 days at most")
    dist.destroy_process_group(group)


def _mpi_or_gloo():
    return "mpi" if mt._backend.launched_by_mpi() else "gloo"


def subgroups(rank, ws):
    evens = list(range(0, ws, 2))
    g = dist.new_group(evens, backend="mcr")  # every rank calls it; odd ranks are not members
    if rank in evens:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        same(t, torch.tensor([float(sum(evens))]), "all_reduce on the even ranks")
        check(dist.get_rank(g) == evens.index(rank), "group rank")
        # Roots are global ranks in torch's API: broadcast from the last even rank.
        b = torch.tensor([float(rank)])
        dist.broadcast(b, src=evens[-1], group=g)
        same(b, torch.tensor([float(evens[-1])]), "broadcast in the strided group")
    else:
        check(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member got a group")
    # A large all_reduce on the even ranks only (as one pipeline stage's data-parallel group),
    # then a group every rank forms and an all_reduce over it: under mpirun, on MPI, where the
    # new communicator's id is agreed with libnbc's iallreduce (docs/mpi-backend.md).
    if rank in evens:
        big = torch.full((1 << 18,), float(rank))
        mt.all_reduce(big, group=g, async_op=True, backend=_mpi_or_gloo()).wait()
        same(big[:4], torch.full((4,), float(sum(evens))), "1 MiB all_reduce on the even ranks")
    everyone = dist.new_group(list(range(ws)), backend="mcr")
    t = torch.full((1 << 18,), float(rank))
    mt.all_reduce(t, group=everyone, backend=_mpi_or_gloo())
    same(t[-4:], torch.full((4,), float(ws * (ws - 1) / 2)), "all_reduce on a new group of all")
    if ws >= 3:
        tail = list(range(1, ws))
        h = mt.new_group(tail)
        if rank in tail:
            out = [torch.zeros(2) for _ in tail]
            dist.all_gather(out, torch.full((2,), float(rank)), group=h)
            for i, r in enumerate(tail):
                same(out[i], torch.full((2,), float(r)), f"all_gather in group {tail}")
    dist.barrier()


def autograd_ops(rank, ws):
    x = torch.full((4,), float(rank + 1), requires_grad=True)
    y = dnn.all_reduce(x)
    y.sum().backward()
    same(x.grad, torch.full((4,), float(ws)), "torch.distributed.nn.all_reduce backward")
    x = torch.full((2,), float(rank + 1), requires_grad=True)
    parts = dnn.all_gather(x)
    (sum((i + 1) * p.sum() for i, p in enumerate(parts))).backward()
    # d/dx of sum_i (i+1) * sum(x_i) summed over ranks: rank r's slot weight is (r+1), times ws.
    same(x.grad, torch.full((2,), float((rank + 1) * ws)), "torch.distributed.nn.all_gather backward")


def mcr_api(rank, ws):
    # Under torchrun-style variables MPI is not initialised: mcr runs on Gloo alone.
    usable = ["mpi", "gloo"] if mt._backend.launched_by_mpi() else ["gloo"]
    for be in [None] + usable:
        t = torch.ones(6)
        mt.all_reduce(t, backend=be)
        same(t, torch.full((6,), float(ws)), f"mcr.torch.all_reduce backend={be}")
    out = torch.zeros(3 * ws)
    mt.all_gather_into_tensor(out, torch.full((3,), float(rank)), backend="gloo")
    same(out, torch.arange(ws).repeat_interleave(3).float(), "all_gather_into_tensor on gloo")
    with mt.backend(usable[0]):
        t = torch.ones(2)
        mt.all_reduce(t)
    same(t, torch.full((2,), float(ws)), "backend() context")
    # Blocks that overlap (two threads) and end in the order they began: the later one's name
    # stays in force until it ends, and nothing is left forced after both.
    first, second = mt.backend(usable[-1]), mt.backend(usable[0])
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    check(mt._mcr_torch.backend_override() == usable[0],
          f"after the first of two overlapping blocks ends: {mt._mcr_torch.backend_override()!r}")
    second.__exit__(None, None, None)
    check(mt._mcr_torch.backend_override() == "",
          f"a forced backend outlives every block: {mt._mcr_torch.backend_override()!r}")
    t = torch.ones(2)
    mt.all_reduce(t)
    same(t, torch.full((2,), float(ws)), "all_reduce after overlapping backend() blocks")
    check(mt.explain("all_reduce", 4, torch.float32)["backend"] == usable[0], "explain")
    forced = mt.explain("all_reduce", tensor=torch.ones(1))
    check(len(forced["steps"]) >= 1 and forced["source"], f"explain steps: {forced}")
    if rank == 0:
        print("explain(all_reduce, 4 B):", mt.explain("all_reduce", 4), flush=True)


def errors(rank, ws):
    # A root outside the group: raised on every rank with mcr's message, nothing sent.
    try:
        dist.broadcast(torch.ones(2), src=ws + 5)
        check(False, "broadcast with a bad root did not raise")
    except (RuntimeError, ValueError) as e:
        check("root" in str(e).lower() or "rank" in str(e).lower(), f"bad-root message: {e}")
    # A peer outside the group: refused by the call itself, not later by its Work.
    for post in (lambda: dist.isend(torch.ones(2), dst=ws + 5),
                 lambda: dist.irecv(torch.ones(2), src=ws + 5)):
        try:
            post()
            check(False, "a peer outside the group did not raise at the call")
        except RuntimeError as e:
            check("outside the group" in str(e), f"bad-peer message: {e}")
    # all_gather_coalesced: an output whose size differs from its input's (torch's Python does not
    # check it) is refused, not filled with the wrong elements.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the API is deprecated, still callable
        try:
            dist.all_gather_coalesced([[torch.zeros(3), torch.zeros(2)] for _ in range(ws)],
                                      [torch.ones(2), torch.ones(3)])
            check(False, "all_gather_coalesced with mis-sized outputs did not raise")
        except RuntimeError as e:
            check("output [0][0]" in str(e), f"all_gather_coalesced message: {e}")
    # A coalesced batch whose second pair is mis-sized is refused whole: its first pair is never
    # posted (before, it went ahead with no Work and wrote its output later).
    outs = [torch.zeros(2), torch.zeros(3)]
    try:
        with dist._coalescing_manager():
            dist.reduce_scatter_tensor(outs[0], torch.ones(2 * ws))
            dist.reduce_scatter_tensor(outs[1], torch.ones(2 * ws))
        check(False, "a coalesced reduce_scatter_tensor with a mis-sized pair did not raise")
    except RuntimeError as e:
        check("reduce_scatter_tensor_coalesced" in str(e), f"coalesced message: {e}")
    dist.barrier()
    same(outs[0], torch.zeros(2), "the first pair of a refused batch")
    # A dtype mcr lacks: refused before anything is sent.
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int16))
        check(False, "int16 all_reduce did not raise")
    except RuntimeError as e:
        check("int16" in str(e).lower() or "short" in str(e).lower(), f"dtype message: {e}")
    # An unknown backend override.
    try:
        mt.all_reduce(torch.ones(2), backend="nonexistent")
        check(False, "unknown backend did not raise")
    except RuntimeError as e:
        check("nonexistent" in str(e), f"unknown backend message: {e}")
    dist.barrier()  # the world communicator is still usable after argument errors
    batch_after_exception(rank, ws)


def batch_after_exception(rank, ws):
    """An exception inside a coalescing batch: torch's _coalescing_manager then never ends the
    batch (no `finally`). Here the third operation of a batch_isend_irecv sends an int16 tensor,
    which mcr refuses on the calling thread, after a send and a receive of a ring were posted; the
    next batches must still work."""
    right, left = (rank + 1) % ws, (rank - 1) % ws
    mine = torch.full((3,), float(rank))
    got = torch.zeros(3)
    ops = [dist.P2POp(dist.isend, mine, right), dist.P2POp(dist.irecv, got, left),
           dist.P2POp(dist.isend, torch.ones(3, dtype=torch.int16), right)]
    try:
        dist.batch_isend_irecv(ops)
        check(False, "a send of an int16 tensor did not raise")
    except RuntimeError as e:
        check("int16" in str(e).lower() or "short" in str(e).lower(), f"dtype message: {e}")
    # The ring's send and receive were posted before the error, and complete on their own.
    for attempt in range(3):
        again = torch.zeros(3)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine + attempt, right),
                                        dist.P2POp(dist.irecv, again, left)])
        for w in works:
            w.wait()
        same(again, torch.full((3,), float(left + attempt)), f"batch {attempt} after the exception")
    dist.barrier()
    same(got, torch.full((3,), float(left)), "receive posted before the exception")


def local_group_after_partial_one(rank, ws):
    """A use_local_synchronization group after a group that not every rank is in: torch names it
    from its ranks and the number of groups the calling rank holds, which then differs between its
    members (the last rank holds one more); the members still form one mcr group (docs/torch.md,
    "Groups"). Before, they passed different keys and waited in MPI_Comm_create_group for good."""
    dist.new_group([ws - 1])  # every rank calls it; only the last one is in it
    g = dist.new_group(list(range(ws)), use_local_synchronization=True)
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t, group=g)
    same(t, torch.full((4,), float(ws * (ws + 1) // 2)), "all_reduce on the local group")


def member_comes_late(rank, ws):
    """A member of a new group that comes after the others waited out the group's timeout for it:
    they raise within that timeout, naming it, and it raises on arrival instead of going on into
    the library's group formation (MPI_Comm_create_group would wait there for good for members that
    left). The next group of these ranks forms as usual."""
    ranks, late = list(range(ws)), ws - 1
    if rank == late:
        time.sleep(4)
    start = time.monotonic()
    try:
        dist.new_group(ranks, timeout=timedelta(seconds=1), use_local_synchronization=True)
        check(False, "new_group with a member 4 s late did not raise")
    except RuntimeError as e:
        took = time.monotonic() - start
        check(isinstance(e, mt._backend._C.TimeoutError), f"late member: {type(e).__name__}: {e}")
        if rank == late:
            check("gave up" in str(e) and took < 2,
                  f"the late member raised after {took:.1f} s: {e}")
        else:
            check(f"ranks [{late}] had not arrived" in str(e) and 1 <= took < 3.8,
                  f"a waiting member raised after {took:.1f} s (timeout 1 s): {e}")
    g = dist.new_group(ranks, use_local_synchronization=True)
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t, group=g)
    same(t, torch.full((2,), float(ws * (ws + 1) // 2)), "all_reduce on the group formed next")


def main():
    rank, ws = setup()
    futures(rank, ws)
    outputs_released(rank, ws)
    never_timing_out(rank, ws)
    local_group_after_partial_one(rank, ws)
    member_comes_late(rank, ws)
    subgroups(rank, ws)
    autograd_ops(rank, ws)
    mcr_api(rank, ws)
    errors(rank, ws)
    finish("test_groups")


if __name__ == "__main__":
    main()
