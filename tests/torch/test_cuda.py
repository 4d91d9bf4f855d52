"""CUDA tensors on "mcr" (needs a GPU; prints "SKIP: no CUDA device" and exits 0 without one, which
ctest reports as skipped). Each rank uses device local_rank % device_count. For every backend mcr
can run CUDA tensors on (its automatic choice, and MPI and Gloo through the device staging layer):
all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor (with SUM and PREMUL_SUM),
all_to_all_single and gather (on a side stream), checked against values computed on the host from every rank's input. The inputs are written by a kernel
queued on the caller's current stream just before each call, without a synchronisation: the
operation must be ordered after it. A DDP step on the GPU must match DDP on the CPU over gloo. The
default group is bound to the rank's device (init_process_group's device_id), and groups made by
split_group and new_group with that binding all_reduce right."""

import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh

import mcr.torch as mt

from common import check, data, finish, same


def device_for_this_process():
    """The device mcr's NCCL uses: the launcher's local rank modulo the devices (read before the
    world is formed, from the launcher's variables)."""
    return torch.device("cuda", mt.get_local_rank() % torch.cuda.device_count())


def ops(rank, ws, dev, backend):
    what = f"cuda, backend {backend or 'auto'}"
    n = 4 * ws
    host = data(rank, n, torch.float32)
    with mt.backend(backend):
        x = torch.empty(n, device=dev)
        x.copy_(host, non_blocking=True)  # queued on the current stream, not waited for
        dist.all_reduce(x)
        same(x.cpu(), sum(data(r, n, torch.float32) for r in range(ws)), f"{what}: all_reduce")

        b = torch.empty(n, device=dev)
        b.copy_(host, non_blocking=True)
        dist.broadcast(b, 0)
        same(b.cpu(), data(0, n, torch.float32), f"{what}: broadcast")

        out = torch.empty(n * ws, device=dev)
        inp = torch.empty(n, device=dev)
        inp.copy_(host, non_blocking=True)
        dist.all_gather_into_tensor(out, inp)
        same(out.cpu(), torch.cat([data(r, n, torch.float32) for r in range(ws)]),
             f"{what}: all_gather_into_tensor")

        small = torch.empty(4, device=dev)
        big = torch.empty(n, device=dev)
        big.copy_(host, non_blocking=True)
        dist.reduce_scatter_tensor(small, big)
        total = sum(data(r, n, torch.float32) for r in range(ws))
        same(small.cpu(), total.narrow(0, 4 * rank, 4), f"{what}: reduce_scatter_tensor")

        # PREMUL_SUM (FSDP2 after set_gradient_divide_factor): this rank's input times its factor,
        # a number or a one-element CUDA tensor, scaled on the current stream before the sum.
        for factor in (0.5 * (rank + 1), torch.tensor([0.5 * (rank + 1)], device=dev)):
            big.copy_(host, non_blocking=True)
            dist.reduce_scatter_tensor(small, big, op=dist._make_nccl_premul_sum(factor))
            scaled = sum(0.5 * (r + 1) * data(r, n, torch.float32) for r in range(ws))
            same(small.cpu(), scaled.narrow(0, 4 * rank, 4),
                 f"{what}: reduce_scatter_tensor PREMUL_SUM ({type(factor).__name__})")

        a2a = torch.empty(n, device=dev)
        src = torch.empty(n, device=dev)
        src.copy_(host, non_blocking=True)
        dist.all_to_all_single(a2a, src)
        same(a2a.cpu(), torch.cat([data(r, n, torch.float32).narrow(0, 4 * rank, 4)
                                   for r in range(ws)]), f"{what}: all_to_all_single")

        # gather on a side stream whose input is written after a sleeping kernel: a rank other
        # than the root has no output, and its read of the input must still wait for that work.
        side = torch.cuda.Stream(device=dev)
        with torch.cuda.stream(side):
            g_in = torch.empty(n, device=dev)
            torch.cuda._sleep(50_000_000)
            g_in.copy_(host, non_blocking=True)
            g_out = [torch.empty(n, device=dev) for _ in range(ws)] if rank == 0 else None
            dist.gather(g_in, g_out, dst=0)
        side.synchronize()
        if rank == 0:
            same(torch.cat([t.cpu() for t in g_out]),
                 torch.cat([data(r, n, torch.float32) for r in range(ws)]),
                 f"{what}: gather on a side stream")


def ddp_step(rank, dev):
    def model():
        torch.manual_seed(5)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    gloo = dist.new_group(backend="gloo")
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 2, generator=g)
    results = []
    for m, d, group in ((model().to(dev), dev, None), (model(), torch.device("cpu"), gloo)):
        ddp = nn.parallel.DistributedDataParallel(m, process_group=group)
        nn.functional.mse_loss(ddp(x.to(d)), y.to(d)).backward()
        results.append([p.grad.detach().cpu() for p in m.parameters()])
    for i, (a, b) in enumerate(zip(*results)):
        check(torch.allclose(a, b, rtol=1e-5, atol=1e-6),
              f"DDP gradient {i} on the GPU differs from the CPU's (max {(a - b).abs().max()})")


def split_on_device(rank, ws, dev):
    """split_group (one group per rank, then one of every rank) and new_group of rank 0 alone,
    with the default group bound to a device; all_reduce of a CUDA tensor on each."""
    for split in ([[r] for r in range(ws)], [list(range(ws))]):
        g = dist.split_group(split_ranks=split)
        t = torch.full((4,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=g)
        want = float(sum(r + 1 for r in dist.get_process_group_ranks(g)))
        same(t.cpu(), torch.full((4,), want), f"all_reduce on split group {split}")
    g = dist.new_group([0])
    if rank == 0:
        t = torch.full((4,), 5.0, device=dev)
        dist.all_reduce(t, group=g)
        same(t.cpu(), torch.full((4,), 5.0), "all_reduce on new_group([0])")
    else:
        check(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member got a group")
    # A mesh with a dimension of size 1: DeviceMesh forms that dimension's groups with split_group
    # (the other, of every rank, is the default group).
    mesh = init_device_mesh("cuda", (ws, 1), mesh_dim_names=("dp", "tp"))
    for name in ("dp", "tp"):
        sub = mesh[name].get_group()
        t = torch.full((4,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=sub)
        want = float(sum(r + 1 for r in dist.get_process_group_ranks(sub)))
        same(t.cpu(), torch.full((4,), want), f"all_reduce on mesh dim {name}")
    # torch's NCCL beside mcr's default group: new_group must not hand it mcr to split from.
    if dist.is_nccl_available():
        g = dist.new_group(list(range(ws)), backend="nccl")
        t = torch.full((4,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=g)
        same(t.cpu(), torch.full((4,), float(sum(r + 1 for r in range(ws)))),
             "all_reduce on an NCCL group beside mcr")


def main():
    if not torch.cuda.is_available() or not mt._backend._C.cuda_tensors_supported():
        print("SKIP: no CUDA device (or a build without CUDA)", flush=True)
        sys.exit(0)
    # Bound to its device, as init_process_group(device_id=...) binds it: torch then forms
    # DeviceMesh's groups with split_group and asks new_group's non-members to take part in splits.
    dev = device_for_this_process()
    torch.cuda.set_device(dev)
    mt.init_processes(timeout=timedelta(seconds=120), device_id=dev)
    rank, ws = dist.get_rank(), dist.get_world_size()
    for backend in (None, "mpi", "gloo"):
        try:
            ops(rank, ws, dev, backend)
        except RuntimeError as e:
            # A backend this job lacks (no MPI under torchrun) is refused with a message, on every
            # rank alike.
            if backend is not None and "not" in str(e) and backend in str(e):
                if rank == 0:
                    print(f"backend {backend}: not available here: {e}", flush=True)
                continue
            raise
    ddp_step(rank, dev)
    split_on_device(rank, ws, dev)
    if rank == 0:
        print(f"CUDA tensors on {ws} ranks, {torch.cuda.device_count()} device(s): every op right",
              flush=True)
    finish("test_cuda")


if __name__ == "__main__":
    main()
