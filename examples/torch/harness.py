"""Shared by the torch workloads: which communication stack to run on, step timing, and the time
spent in communication (explicit all_to_all calls plus DDP's gradient all_reduces).

--dist torch-gloo   torch.distributed's own gloo backend (the baseline)
--dist mcr-mpi      backend "mcr", every operation forced to MPI
--dist mcr-gloo     backend "mcr", every operation forced to Gloo
--dist mcr-auto     backend "mcr", mcr's selection (rules / MCR_TUNING table / defaults)
"""

import argparse
import contextlib
import statistics
import threading
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import mcr.torch as mt

class AllToAll(torch.autograd.Function):
    """Equal-split all_to_all of rows; its gradient is the same exchange in reverse."""

    @staticmethod
    def forward(ctx, x, run):
        ctx.run = run
        out = torch.empty_like(x)
        with run.comm():
            dist.all_to_all_single(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty_like(grad)
        with ctx.run.comm():
            dist.all_to_all_single(out, grad.contiguous())
        return out, None


DISTS = ("torch-gloo", "mcr-mpi", "mcr-gloo", "mcr-auto")


def parse(description, steps=20):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dist", choices=DISTS, default="mcr-auto")
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the timing")
    args = p.parse_args()
    # Refused before any rank starts: every rank parses the same arguments.
    if args.warmup < 0:
        p.error(f"--warmup {args.warmup}: must be 0 or more")
    if args.steps <= args.warmup:
        p.error(f"--steps {args.steps}: must be greater than --warmup ({args.warmup}), or no "
                f"step is timed")
    return args


class Run:
    """Sets the stack up and accounts time: `with run.comm():` around explicit operations."""

    def __init__(self, args):
        self.args = args
        mt.init_processes("gloo" if args.dist == "torch-gloo" else "mcr")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        forced = {"mcr-mpi": "mpi", "mcr-gloo": "gloo"}.get(args.dist)
        # The override covers every mcr operation issued in the run, DDP's included.
        self._override = mt.backend(forced) if forced else contextlib.nullcontext()
        self._override.__enter__()
        self.comm_s = 0.0
        # DDP's completion callbacks add from the backend's thread while the main thread adds its
        # own: `+=` on a float is a read and a write, and one thread's sum was lost between them.
        self._comm_lock = threading.Lock()
        self.losses = []
        self.step_s = []

    @contextlib.contextmanager
    def comm(self):
        t = time.perf_counter()
        yield
        self._add_comm(time.perf_counter() - t)

    def _add_comm(self, seconds):
        with self._comm_lock:
            self.comm_s += seconds

    def ddp(self, module):
        """DDP over the default group, with a hook that times each bucket's all_reduce from issue
        to completion (overlapping the backward pass, so this is an upper bound)."""
        model = DDP(module)

        def timed_allreduce(_, bucket):
            began = time.perf_counter()
            buf = bucket.buffer().div_(self.world)
            fut = dist.all_reduce(buf, async_op=True).get_future()

            def done(f):
                self._add_comm(time.perf_counter() - began)
                return f.value()[0]

            return fut.then(done)

        model.register_comm_hook(None, timed_allreduce)
        return model

    def average_sharded(self, params):
        """Call after backward, on the parameters each rank owns alone (embedding rows, an expert):
        their gradient is the sum of every rank's loss's gradient, which the reverse all_to_all
        brought back. Divided by the ranks, as DDP divides the replicated ones, so that the whole
        model trains on the mean loss over ranks (summed, they trained at world times the rate)."""
        for p in params:
            if p.grad is not None:
                p.grad.div_(self.world)

    def step(self, i, fn):
        if i == self.args.warmup:
            with self._comm_lock:
                self.comm_s = 0.0
        dist.barrier()
        t = time.perf_counter()
        loss = fn()
        if i >= self.args.warmup:
            self.step_s.append(time.perf_counter() - t)
        # The mean loss over ranks, so every stack reports the same curve.
        v = torch.tensor([float(loss)], dtype=torch.float64)
        dist.all_reduce(v)
        self.losses.append(v.item() / self.world)

    def report(self, name, replicated, sharded):
        """One line on rank 0. step_ms: the median over the timed steps of the slowest rank's step
        (a step ends when its last rank does; one slow step moves a mean, not a median).
        comm_share: the time of the operations summed (DDP's overlap the backward pass and each
        other, so it can exceed 1) over the summed step time of this rank. params: float64 sum and
        sum of squares of every parameter, the replicated ones once and every rank's own, so that
        an exchange that went wrong in the backward pass shows even where the loss hides it."""
        steps = torch.tensor(self.step_s, dtype=torch.float64)
        dist.all_reduce(steps, op=dist.ReduceOp.MAX)
        # statistics.median: torch's median is the lower middle value of an even count.
        median = statistics.median(steps.tolist()) if len(self.step_s) else float("nan")
        share = self.comm_s / max(sum(self.step_s), 1e-12)

        def moments(params):
            flat = [p.detach().double().flatten() for p in params]
            both = torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)
            return torch.tensor([both.sum().item(), (both * both).sum().item()],
                                dtype=torch.float64)

        owned = moments(sharded)
        dist.all_reduce(owned)
        checksum = moments(replicated) + owned
        if self.rank == 0:
            curve = " ".join(f"{x:.5f}" for x in self.losses[:: max(1, len(self.losses) // 5)])
            print(f"{name} dist={self.args.dist} ranks={self.world} steps={len(self.losses)} "
                  f"step_ms={median * 1e3:.2f} comm_share={share:.2f} final_loss={self.losses[-1]:.6f}"
                  f" curve=[{curve}] params={checksum[0].item():.12e},{checksum[1].item():.12e}",
                  flush=True)
        self._override.__exit__(None, None, None)
