"""torch.distributed.pipelining on "mcr" against the same on torch's gloo (same processes, same
data): a 4-layer MLP split into 2 stages (one per rank), trained for a few steps with GPipe and
with 1F1B (4 microbatches); the last stage's losses and every stage's parameters must be
bit-identical to gloo's (pipelining moves activations and gradients point to point: no reduction,
so nothing depends on the library). Also batch_isend_irecv on its own: a ring exchange whose values
are checked. Run with 2 ranks."""

import torch
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import torch.distributed as dist

from common import check, finish, same, setup

D, MICRO, BATCH, STEPS = 16, 4, 8, 3


def stage_module(rank):
    torch.manual_seed(20 + rank)
    return nn.Sequential(nn.Linear(D, D), nn.Tanh(), nn.Linear(D, D), nn.Tanh())


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(BATCH, D, generator=g), torch.randn(BATCH, D, generator=g)


def train(schedule_cls, group, rank, ws):
    module = stage_module(rank)
    stage = PipelineStage(module, rank, ws, torch.device("cpu"), group=group)
    schedule = schedule_cls(stage, MICRO, loss_fn=nn.functional.mse_loss)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    all_losses = []
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        if rank == 0:
            schedule.step(x)
        else:
            losses = []
            schedule.step(target=y, losses=losses)
            all_losses.extend(l.detach().clone() for l in losses)
        opt.step()
    return all_losses, [p.detach().clone() for p in module.parameters()]


def ring(rank, ws):
    send = torch.full((5,), float(rank + 1))
    recv = torch.zeros(5)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % ws), dist.P2POp(dist.irecv, recv, (rank - 1) % ws)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same(recv, torch.full((5,), float((rank - 1) % ws + 1)), "batch_isend_irecv ring")


def main():
    rank, ws = setup()
    check(ws == 2, "run with 2 ranks (one pipeline stage each)")
    gloo = dist.new_group(backend="gloo")
    ring(rank, ws)
    for schedule_cls in (ScheduleGPipe, Schedule1F1B):
        la, pa = train(schedule_cls, None, rank, ws)
        lb, pb = train(schedule_cls, gloo, rank, ws)
        name = schedule_cls.__name__
        if rank == ws - 1:
            check(len(la) == STEPS * MICRO, f"{name}: {len(la)} losses, want {STEPS * MICRO}")
            for i, (x, y) in enumerate(zip(la, lb)):
                check(torch.equal(x, y), f"{name}: loss {i} is {x.item()} on mcr, {y.item()} on gloo")
        for i, (x, y) in enumerate(zip(pa, pb)):
            check(torch.equal(x, y), f"{name}: stage {rank} parameter {i} differs from gloo's")
        if rank == ws - 1:
            print(f"pipelining {name}: {STEPS} steps x {MICRO} microbatches, losses and parameters "
                  "bit-identical to gloo", flush=True)
    finish("test_pipelining")


if __name__ == "__main__":
    main()
