"""DDP on "mcr" against DDP on torch's gloo backend (same processes, same data) for 20 steps, with
and without communication hooks: parameters bit-identical at 2 ranks (a + b rounds the same in any
order), allclose at more; with the exact hooks, both allclose to a single-process model trained on
the whole batch. PowerSGD is lossy, so it is held to gloo only; its `.then()` callbacks post
collectives and wait for them, on whichever thread completes the future. It runs with one bucket:
with several in flight, the order in which their callbacks post collectives depends on timing on
any backend whose futures complete asynchronously (torch's gloo then hangs or mismatches too); with
one, every rank posts in the same order. (Its batched variant and the quantization hooks fail on
CPU tensors inside torch, on gloo alike.)"""

import torch
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP

import torch.distributed as dist

from common import check, finish, setup

STEPS = 20
BATCH = 8
# Kept until the interpreter exits. PowerSGD's state holds torch's gloo group, and its callbacks'
# closures are released by gloo's worker thread after it completed their futures: were the last
# reference dropped there, ProcessGroupGloo's destructor would join that very thread, and
# std::thread raises "Resource deadlock avoided" (seen once in 20 runs, at exit, in torch).
_KEEP = []


def make_model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))


def batch(step, rank):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    return torch.randn(BATCH, 16, generator=g), torch.randn(BATCH, 4, generator=g)


def train(model, rank, steps=STEPS, ranks=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        if ranks is None:
            x, y = batch(step, rank)
        else:  # the reference: every rank's batch at once
            xs, ys = zip(*(batch(step, r) for r in ranks))
            x, y = torch.cat(xs), torch.cat(ys)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def main():
    rank, ws = setup()
    gloo = dist.new_group(backend="gloo")
    reference = train(make_model(), rank, ranks=list(range(ws)))
    def powersgd_state(group):
        # Compression from step 2 (warm-up steps use plain all_reduce); the same seed on both sides.
        return powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                      start_powerSGD_iter=2, min_compression_rate=0.5)

    hooks = {  # name: (hook, its state for mcr's default group and for gloo's, lossy)
        "none": (None, None, None, False),
        "allreduce_hook": (default_hooks.allreduce_hook, None, gloo, False),
        "fp16_compress_hook": (default_hooks.fp16_compress_hook, None, gloo, False),
        "powerSGD_hook": (powersgd.powerSGD_hook, powersgd_state(None), powersgd_state(gloo), True),
    }
    for name, (hook, state_a, state_b, lossy) in hooks.items():
        # Small buckets, several allreduces per step; one bucket for the lossy hook (above).
        cap = 25 if lossy else 0.01
        a = DDP(make_model(), bucket_cap_mb=cap)
        b = DDP(make_model(), bucket_cap_mb=cap, process_group=gloo)
        if hook is not None:
            a.register_comm_hook(state_a, hook)
            b.register_comm_hook(state_b, hook)
            _KEEP.append((b, state_b))
        pa, pb = train(a, rank), train(b, rank)
        for i, (x, y) in enumerate(zip(pa, pb)):
            if ws == 2:
                check(torch.equal(x, y), f"hook={name}: parameter {i} differs from gloo's "
                      f"(max |diff| {(x - y).abs().max().item()})")
            else:
                # More than two addends: the libraries sum in different orders; fp16 sums round
                # at every step, so that hook gets a half-precision tolerance.
                tol = 1e-2 if name == "fp16_compress_hook" else 1e-5
                check(torch.allclose(x, y, rtol=tol, atol=tol), f"hook={name}: parameter {i} "
                      f"(max |diff| {(x - y).abs().max().item()})")
            if lossy:
                continue
            tol = 2e-2 if name == "fp16_compress_hook" else 1e-4
            check(torch.allclose(x, reference[i], rtol=tol, atol=tol),
                  f"hook={name}: parameter {i} far from the single-process reference "
                  f"(max |diff| {(x - reference[i]).abs().max().item()})")
        if rank == 0:
            print(f"DDP hook={name}: {STEPS} steps match gloo "
                  f"({'bit-identical' if ws == 2 else 'allclose'})"
                  f"{'' if lossy else ' and the reference'}", flush=True)
    finish("test_ddp")


if __name__ == "__main__":
    main()
