"""DDP on "mcr" against DDP on torch's gloo backend (same processes, same data) for 20 steps, with
and without communication hooks: parameters bit-identical at 2 ranks (a + b rounds the same in any
order), allclose at more; both allclose to a single-process model trained on the whole batch."""

import torch
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import torch.distributed as dist

from common import check, finish, setup

STEPS = 20
BATCH = 8


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
    hooks = {
        "none": None,
        "allreduce_hook": default_hooks.allreduce_hook,
        "fp16_compress_hook": default_hooks.fp16_compress_hook,
    }
    for name, hook in hooks.items():
        a = DDP(make_model(), bucket_cap_mb=0.01)  # small buckets: several allreduces per step
        b = DDP(make_model(), bucket_cap_mb=0.01, process_group=gloo)
        if hook is not None:
            a.register_comm_hook(None, hook)
            b.register_comm_hook(gloo, hook)
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
            tol = 2e-2 if name == "fp16_compress_hook" else 1e-4
            check(torch.allclose(x, reference[i], rtol=tol, atol=tol),
                  f"hook={name}: parameter {i} far from the single-process reference "
                  f"(max |diff| {(x - reference[i]).abs().max().item()})")
        if rank == 0:
            print(f"DDP hook={name}: {STEPS} steps match gloo "
                  f"({'bit-identical' if ws == 2 else 'allclose'}) and the reference", flush=True)
    finish("test_ddp")


if __name__ == "__main__":
    main()
