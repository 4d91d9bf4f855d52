"""Training-step time of torch 2.x workloads on "mcr" against the same on torch's gloo, same run.

    mpirun -np 2 python -m mcr.torch.steps [--steps 10] [--warmup 3] [--rounds 3]
    python -m torch.distributed.run --standalone --nproc_per_node 2 -m mcr.torch.steps

Workloads (small models: the CPU runs their arithmetic; what differs between the columns is the
communication): DDP of an MLP (gradient all-reduces in buckets), FSDP2 (fully_shard) of a small
transformer (all-gathers in place, reduce-scatters with AVG), a tensor-parallel MLP
(parallelize_module: all-reduces), and a 2-stage pipeline with 1F1B (send/recv; 2 ranks only).
For each workload, rounds alternate gloo and mcr (a new order each round); a round runs --warmup
steps, then times --steps steps; a step's time is the slowest rank's. The table shows the median
step over every measured step of every round, and mcr's speedup (gloo / mcr).
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

import torch.distributed as dist

import mcr.torch as mt

D, FF, HEADS, SEQ, BATCH = 256, 1024, 4, 64, 8


def slowest(seconds):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_gloo)
    return t.item()


def ddp(group, mesh, rank):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, FF), nn.ReLU(), nn.Linear(FF, FF), nn.ReLU(), nn.Linear(FF, D))
    m = nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=1)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(BATCH * SEQ // 8, D), torch.randn(BATCH * SEQ // 8, D)

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return step


def fsdp2(group, mesh, rank):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
                            for _ in range(2)])
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(BATCH // 2, SEQ, D)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return step


def tensor_parallel(group, mesh, rank):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, FF), nn.ReLU(), nn.Linear(FF, D))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(BATCH * SEQ // 8, D)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return step


def pipeline(group, mesh, rank):
    torch.manual_seed(rank)
    module = nn.Sequential(nn.Linear(D, FF), nn.ReLU(), nn.Linear(FF, D))
    stage = PipelineStage(module, rank, dist.get_world_size(), torch.device("cpu"), group=group)
    schedule = Schedule1F1B(stage, 4, loss_fn=nn.functional.mse_loss)
    opt = torch.optim.SGD(module.parameters(), lr=0.01)
    x, y = torch.randn(BATCH * 4, D), torch.randn(BATCH * 4, D)

    def step():
        opt.zero_grad()
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=y, losses=[])
        opt.step()
    return step


WORKLOADS = {"ddp": ddp, "fsdp2": fsdp2, "tp": tensor_parallel, "pipeline": pipeline}


def main():
    global _gloo
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    args = ap.parse_args()
    # Checked before any rank starts: each rank refuses alike, and nothing waits for a peer.
    for flag, value, least in (("--steps", args.steps, 1), ("--rounds", args.rounds, 1),
                               ("--warmup", args.warmup, 0)):
        if value < least:
            raise SystemExit(f"mcr.torch.steps: {flag} {value}: must be at least {least}")
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"mcr.torch.steps: --workloads {args.workloads}: unknown workload "
                         f"{unknown[0]!r} (known: {', '.join(WORKLOADS)})")
    mt.init_processes()
    rank, ws = dist.get_rank(), dist.get_world_size()
    _gloo = dist.new_group(backend="gloo")
    stacks = {"gloo": (_gloo, DeviceMesh.from_group(_gloo, "cpu")),
              "mcr": (None, init_device_mesh("cpu", (ws,)))}
    if rank == 0:
        print(f"# training step, {ws} ranks, torch {torch.__version__}: median of "
              f"{args.rounds} rounds x {args.steps} steps (after {args.warmup} warm-up), "
              "slowest rank", flush=True)
        print(f"{'workload':>10} {'gloo ms':>10} {'mcr ms':>10} {'speedup':>8}", flush=True)
    for name in names:
        if name == "pipeline" and ws != 2:
            if rank == 0:
                print(f"{name:>10} left out: its schedule has 2 stages, one per rank; this job has "
                      f"{ws} ranks", flush=True)
            continue
        times = {"gloo": [], "mcr": []}
        for r in range(args.rounds):
            for stack in (("gloo", "mcr") if r % 2 == 0 else ("mcr", "gloo")):
                group, mesh = stacks[stack]
                step = WORKLOADS[name](group, mesh, rank)
                for _ in range(args.warmup):
                    step()
                for _ in range(args.steps):
                    dist.barrier(group=_gloo)
                    t0 = time.perf_counter()
                    step()
                    times[stack].append(slowest(time.perf_counter() - t0))
        g, m = statistics.median(times["gloo"]), statistics.median(times["mcr"])
        if rank == 0:
            print(f"{name:>10} {g * 1e3:10.2f} {m * 1e3:10.2f} {g / m:7.2f}x", flush=True)
    dist.barrier()


if __name__ == "__main__":
    main()
