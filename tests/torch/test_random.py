"""Randomized sequences of torch.distributed operations on the "mcr" backend, each result checked.

What the C++ mixing test (tests/mpi/comm/test_mixing.cpp) does for the runtime, this does for the
binding, whose communication thread, caller and waiter shortcuts and parked operations
(src/torch/comm_thread.hpp) decide which thread calls mcr and when. Every rank derives the same
sequence of operations from the seed: the operation, dtype, size, root, backend (automatic, or
forced with mcr.torch.backend), sync or async, and now and then a coalesced batch, a ring of
batch_isend_irecv, or a new group (made by every rank, or by its members alone with
use_local_synchronization) on which a few operations run and stay in flight beside the world's,
and which half the time is destroyed at once.
Only how each rank finishes its asynchronous operations differs per rank (a second generator
seeded with the seed and the rank): when, in which order, and how (Work.wait, its future's wait,
polling is_completed, a chained future, or a wait from another thread while this one goes on
posting), which thread issues each operation (now and then another one, as autograd's threads do
in DDP), with short random delays so that ranks arrive out of step. Inputs are small integers,
so every result is compared exactly with what is computed here from every rank's input.

    mpirun -np 3 python3 test_random.py [--seeds 1-3] [--ops 200]
    (or MCR_TEST_SEEDS / MCR_TEST_OPS; torchrun works too, with Gloo as the only library)

Every failure names the seed and the operation's index: rerun with --seeds <seed>.
"""

import argparse
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch as mt
from common import check, data, finish, setup

R = dist.ReduceOp
OP_TIMEOUT = timedelta(seconds=30)
COUNTS = [1, 1, 7, 100, 1000, 4099, 20000, 70000]  # 20000 and 70000 fp32: past the 64 KiB poll
DTYPES = [torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8]
COLLECTIVES = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
               "reduce_scatter_tensor", "all_to_all_single", "all_to_all_uneven", "gather",
               "scatter", "barrier", "p2p"]
WAYS = ["wait", "future", "poll", "then", "thread"]


def parse_seeds(text):
    seeds = []
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def reduce_of(values, op):
    acc = values[0].to(torch.int64)
    for v in values[1:]:
        v = v.to(torch.int64)
        acc = acc + v if op == R.SUM else torch.maximum(acc, v) if op == R.MAX else torch.minimum(acc, v)
    return acc.to(values[0].dtype)


class Pending:
    """An operation issued on this rank and not yet checked: its handles and its check."""

    def __init__(self, index, what, works, verify):
        self.index, self.what, self.works, self.verify = index, what, works, verify
        self.thread_wait = None  # a wait running on another thread


class Sequence:
    def __init__(self, seed, ops, backends, pool, issuer, trace=False):
        self.seed, self.ops, self.backends, self.pool = seed, ops, backends, pool
        self.issuer = issuer  # another thread that issues some operations (as autograd's do)
        self.trace = trace
        self.rank, self.ws = dist.get_rank(), dist.get_world_size()
        self.shared = random.Random(seed)                       # the same on every rank
        self.mine = random.Random(seed * 1_000_003 + self.rank)  # this rank's own choices
        self.pending = []
        self.stats = {"ops": 0, "async": 0, "groups": 0, "destroyed": 0, "batches": 0,
                      "other_thread": 0}
        for way in WAYS:
            self.stats[way] = 0

    def fail(self, index, what, message):
        raise AssertionError(f"rank {self.rank}: seed {self.seed}, operation #{index} ({what}): "
                             f"{message}")

    # -- one operation -----------------------------------------------------------------------

    def issue(self, index, group, members):
        """Issues operation `index` of the shared sequence on `group` (whose members, as world
        ranks, are `members`); returns a Pending, or None when this rank is not a member."""
        rng = self.shared
        kind = rng.choice(COLLECTIVES)
        dtype = rng.choice(DTYPES)
        n = rng.choice(COUNTS)
        root = rng.choice(members)
        op = rng.choice([R.SUM, R.MAX, R.MIN])
        asyn = rng.random() < 0.5
        name = rng.choice(self.backends)
        pair = rng.sample(members, 2) if len(members) >= 2 else [members[0], members[0]]
        what = (f"{kind} n={n} {dtype} root={root} {'async' if asyn else 'sync'} "
                f"backend={name or 'auto'} group={members}")
        if self.trace:
            print(f"rank {self.rank} #{index}: {what}", flush=True)
        if self.rank not in members:
            return None
        if kind == "p2p" and pair[0] == pair[1]:
            kind = "all_reduce"  # a group of one: no peer to exchange with
        k, gsize = members.index(self.rank), len(members)
        inputs = [data(r, n, dtype, salt=index) for r in members]
        mine = inputs[k].clone()
        works, verify = [], None
        with mt.backend(name):
            if kind == "all_reduce":
                w = dist.all_reduce(mine, op=op, group=group, async_op=asyn)
                want = reduce_of(inputs, op)
                works, verify = [w], lambda: (mine, want)
            elif kind == "broadcast":
                w = dist.broadcast(mine, src=root, group=group, async_op=asyn)
                want = inputs[members.index(root)]
                works, verify = [w], lambda: (mine, want)
            elif kind == "reduce":
                w = dist.reduce(mine, dst=root, op=op, group=group, async_op=asyn)
                want = reduce_of(inputs, op)  # elsewhere the tensor's content is unspecified
                works = [w]
                if self.rank == root:
                    verify = lambda: (mine, want)
            elif kind == "all_gather":
                outs = [torch.zeros(n, dtype=dtype) for _ in members]
                w = dist.all_gather(outs, mine, group=group, async_op=asyn)
                works, verify = [w], lambda: (torch.cat(outs), torch.cat(inputs))
            elif kind == "all_gather_into_tensor":
                out = torch.zeros(n * gsize, dtype=dtype)
                w = dist.all_gather_into_tensor(out, mine, group=group, async_op=asyn)
                works, verify = [w], lambda: (out, torch.cat(inputs))
            elif kind == "reduce_scatter_tensor":
                full = [data(r, n * gsize, dtype, salt=index) for r in members]
                out = torch.zeros(n, dtype=dtype)
                w = dist.reduce_scatter_tensor(out, full[k].clone(), op=op, group=group,
                                               async_op=asyn)
                want = reduce_of(full, op)[k * n:(k + 1) * n]
                works, verify = [w], lambda: (out, want)
            elif kind == "all_to_all_single":
                full = [data(r, n * gsize, dtype, salt=index) for r in members]
                out = torch.zeros(n * gsize, dtype=dtype)
                w = dist.all_to_all_single(out, full[k].clone(), group=group, async_op=asyn)
                want = torch.cat([f[k * n:(k + 1) * n] for f in full])
                works, verify = [w], lambda: (out, want)
            elif kind == "all_to_all_uneven":
                # Rank i sends (i + j) % 3 * n // 2 + 1 elements to rank j.
                size = [[(i + j) % 3 * n // 2 + 1 for j in range(gsize)] for i in range(gsize)]
                full = [data(r, sum(size[i]), dtype, salt=index) for i, r in enumerate(members)]
                offsets = [[sum(size[i][:j]) for j in range(gsize)] for i in range(gsize)]
                recv = [size[i][k] for i in range(gsize)]
                out = torch.zeros(sum(recv), dtype=dtype)
                w = dist.all_to_all_single(out, full[k].clone(), output_split_sizes=recv,
                                           input_split_sizes=size[k], group=group, async_op=asyn)
                want = torch.cat([full[i][offsets[i][k]:offsets[i][k] + size[i][k]]
                                  for i in range(gsize)])
                works, verify = [w], lambda: (out, want)
            elif kind == "gather":
                outs = [torch.zeros(n, dtype=dtype) for _ in members] if self.rank == root else None
                w = dist.gather(mine, outs, dst=root, group=group, async_op=asyn)
                if self.rank == root:
                    works, verify = [w], lambda: (torch.cat(outs), torch.cat(inputs))
                else:
                    works, verify = [w], lambda: (mine, inputs[k])
            elif kind == "scatter":
                out = torch.zeros(n, dtype=dtype)
                parts = [data(root, n, dtype, salt=index * 31 + j) for j in range(gsize)]
                w = dist.scatter(out, parts if self.rank == root else None, src=root, group=group,
                                 async_op=asyn)
                works, verify = [w], lambda: (out, parts[k])
            elif kind == "barrier":
                works = [dist.barrier(group=group, async_op=asyn)]
            else:  # p2p: one message from pair[0] to pair[1]; the other members do nothing
                src, dst = pair
                if self.rank == src:
                    works = [dist.isend(mine, dst=dst, group=group) if asyn
                             else dist.send(mine, dst=dst, group=group)]
                elif self.rank == dst:
                    got = torch.zeros(n, dtype=dtype)
                    works = [dist.irecv(got, src=src, group=group) if asyn
                             else dist.recv(got, src=src, group=group)]
                    want = inputs[members.index(src)]
                    verify = lambda: (got, want)
                else:
                    return None
        self.stats["ops"] += 1
        works = [w for w in works if w is not None and not isinstance(w, int)]
        if asyn:
            self.stats["async"] += 1
        p = Pending(index, what, works, verify)
        if not asyn:
            self.check(p)
            return None
        return p

    def batch(self, index):
        """A coalesced batch of all_reduces, or a ring of batch_isend_irecv: one handle each."""
        rng = self.shared
        dtype, n, name = rng.choice(DTYPES), rng.choice(COUNTS), rng.choice(self.backends)
        parts = 1 + rng.randrange(4)
        ring = rng.random() < 0.5
        what = f"{'ring' if ring else 'coalesced all_reduce'} x{parts} n={n} {dtype} " \
               f"backend={name or 'auto'}"
        if self.trace:
            print(f"rank {self.rank} #{index}: {what}", flush=True)
        self.stats["batches"] += 1
        with mt.backend(name):
            if ring:
                nxt, prev = (self.rank + 1) % self.ws, (self.rank - 1) % self.ws
                sends = [data(self.rank, n, dtype, salt=index * 7 + j) for j in range(parts)]
                gots = [torch.zeros(n, dtype=dtype) for _ in range(parts)]
                ops = []
                for j in range(parts):
                    ops.append(dist.P2POp(dist.isend, sends[j], nxt))
                    ops.append(dist.P2POp(dist.irecv, gots[j], prev))
                works = dist.batch_isend_irecv(ops)
                want = torch.cat([data(prev, n, dtype, salt=index * 7 + j) for j in range(parts)])
                return Pending(index, what, works, lambda: (torch.cat(gots), want))
            ts = [data(self.rank, n, dtype, salt=index * 7 + j) for j in range(parts)]
            with dist._coalescing_manager(async_ops=True) as cm:
                for t in ts:
                    dist.all_reduce(t)
            want = torch.cat([reduce_of([data(r, n, dtype, salt=index * 7 + j)
                                         for r in range(self.ws)], R.SUM) for j in range(parts)])
            return Pending(index, what, list(cm.works), lambda: (torch.cat(ts), want))

    def new_group(self, index):
        """A group of a random subset of the ranks, made by every rank or by its members alone,
        with 1-4 operations on it left in flight beside the world's."""
        rng = self.shared
        members = sorted(rng.sample(range(self.ws), 1 + rng.randrange(self.ws)))
        local = rng.random() < 0.5
        if local and self.rank not in members:
            group = None
        else:
            try:
                if self.trace:
                    print(f"rank {self.rank} #{index}: new_group {members} local={local}, in "
                          f"flight {sorted(p.index for p in self.pending)}", flush=True)
                group = dist.new_group(members, timeout=OP_TIMEOUT,
                                       use_local_synchronization=local)
            except Exception as e:  # noqa: BLE001 - reported with the seed and index
                self.fail(index, f"new_group {members} local={local}", f"raised: {e!r}")
        if self.rank in members:
            self.stats["groups"] += 1
        pending = []
        for j in range(1 + rng.randrange(4)):
            p = self.issue(index * 100 + j, group, members)
            if p is not None:
                pending.append(p)
        # Half the groups are destroyed at once, their operations still in flight: torch shuts
        # the backend down, which waits for them; their handles stay good.
        if rng.random() < 0.5 and group not in (None, dist.GroupMember.NON_GROUP_MEMBER):
            if self.trace:
                print(f"rank {self.rank} #{index}: destroy group {members}", flush=True)
            dist.destroy_process_group(group)
            self.stats["destroyed"] += 1
        return pending

    # -- finishing asynchronous operations ---------------------------------------------------

    def check(self, p):
        if p.thread_wait is not None:
            p.thread_wait.result(timeout=OP_TIMEOUT.total_seconds() + 10)
        if p.verify is None:
            return
        got, want = p.verify()
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.fail(p.index, p.what, f"got {got.flatten()[:8].tolist()}..., want "
                      f"{want.flatten()[:8].tolist()}...")

    def finish_one(self, p):
        way = self.mine.choice(WAYS)
        self.stats[way] += 1
        deadline = time.monotonic() + OP_TIMEOUT.total_seconds() + 10
        try:
            for w in p.works:
                if way == "wait":
                    w.wait()
                elif way == "future":
                    w.get_future().wait()
                elif way == "poll":
                    while not w.is_completed():
                        if time.monotonic() > deadline:
                            self.fail(p.index, p.what, "is_completed() never became true")
                        time.sleep(0.0002)
                    w.wait()  # raises what the operation raised
                elif way == "then":
                    w.get_future().then(lambda f: f.value()).wait()
            if way == "thread":
                p.thread_wait = self.pool.submit(lambda: [w.wait() for w in p.works])
                return p  # checked later, after this thread has gone on posting
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - reported with the seed and index
            self.fail(p.index, p.what, f"{way} raised: {e!r}")
        self.check(p)
        return None

    def finish_some(self, everything=False):
        rng = self.mine
        if not everything and rng.random() < 0.6:
            return
        rng.shuffle(self.pending)
        take = len(self.pending) if everything else rng.randrange(len(self.pending) + 1)
        chosen, self.pending = self.pending[:take], self.pending[take:]
        later = [q for q in (self.finish_one(p) for p in chosen) if q is not None]
        if everything:
            for q in later:
                self.check(q)
        else:
            self.pending += later

    def run(self):
        world = list(range(self.ws))
        for index in range(self.ops):
            if self.mine.random() < 0.05:
                time.sleep(self.mine.random() * 0.003)  # out of step with the peers
            choice = self.shared.random()
            if choice < 0.04:
                step = lambda: self.new_group(index)  # noqa: E731
            elif choice < 0.12:
                step = lambda: [self.batch(index)]  # noqa: E731
            else:
                step = lambda: [self.issue(index, None, world)]  # noqa: E731
            # Issued here or, now and then, on another thread; either way before the next one, so
            # every rank still issues in the sequence's order.
            if self.mine.random() < 0.2:
                self.stats["other_thread"] += 1
                issued = self.issuer.submit(step).result()
            else:
                issued = step()
            self.pending += [p for p in issued if p is not None]
            self.finish_some()
        self.finish_some(everything=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default=os.environ.get("MCR_TEST_SEEDS", "1-3"))
    parser.add_argument("--ops", type=int, default=int(os.environ.get("MCR_TEST_OPS", "200")))
    parser.add_argument("--trace", action="store_true", help="print every operation as issued")
    args = parser.parse_args()
    rank, ws = setup(timeout=OP_TIMEOUT)
    # Under mpirun both libraries are up; torchrun and srun without PMI bring up Gloo alone.
    backends = [None, "gloo"] + (["mpi"] if "OMPI_COMM_WORLD_SIZE" in os.environ else [])
    with ThreadPoolExecutor(max_workers=2) as pool, ThreadPoolExecutor(max_workers=1) as issuer:
        for seed in parse_seeds(args.seeds):
            if rank == 0:
                print(f"test_random: seed {seed}, {args.ops} operations, {ws} ranks, backends "
                      f"{[b or 'auto' for b in backends]}", flush=True)
            s = Sequence(seed, args.ops, backends, pool, issuer, args.trace)
            s.run()
            dist.barrier()
            print(f"rank {rank} seed {seed}: {s.stats}", flush=True)
    finish("test_random")


if __name__ == "__main__":
    main()
