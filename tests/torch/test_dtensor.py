"""DeviceMesh and DTensor on "mcr": every value is checked against one computed locally from every
rank's data (small integers, exact in float32, so results are compared with torch.equal).

- a 1-D mesh over the world: DTensor redistribution between Shard, Replicate and Partial (all
  gather, all-reduce, reduce-scatter, all-to-all), and the functional collectives themselves;
- at 4 ranks, a 2-D mesh (2 x 2, named dims): its sub-groups are formed by their members alone, and
  redistribution along each dim;
- a tensor-parallel MLP (parallelize_module with ColwiseParallel then RowwiseParallel) whose output
  and gradients equal an unsharded copy's."""

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

import torch.distributed as dist

from common import check, finish, same, setup


def rank_data(r, n=8, cols=4):
    """Rank r's (n, cols) block: small integers, distinct per rank."""
    return (torch.arange(n * cols, dtype=torch.float32).reshape(n, cols) % 5 + r * 10)


def one_d(rank, ws):
    mesh = init_device_mesh("cpu", (ws,))
    check(dist.get_backend(mesh.get_group()) == "mcr", "the 1-D mesh is not on mcr")
    full = torch.arange(ws * 4 * 3, dtype=torch.float32).reshape(ws * 4, 3)
    d = distribute_tensor(full, mesh, [Shard(0)])
    same(d.to_local(), full.chunk(ws)[rank], "Shard(0) local chunk")
    same(d.redistribute(mesh, [Replicate()]).to_local(), full, "Shard(0) -> Replicate")
    same(d.redistribute(mesh, [Shard(1)]).full_tensor(), full, "Shard(0) -> Shard(1)")

    # Partial: each rank holds an addend; the total is every rank's data summed.
    mine = rank_data(rank, n=ws * 2)
    total = sum(rank_data(r, n=ws * 2) for r in range(ws))
    p = DTensor.from_local(mine, mesh, [Partial()])
    same(p.redistribute(mesh, [Replicate()]).to_local(), total, "Partial -> Replicate")
    same(p.redistribute(mesh, [Shard(0)]).to_local(), total.chunk(ws)[rank], "Partial -> Shard(0)")

    # The functional collectives DTensor is built on.
    group = mesh.get_group()
    x = rank_data(rank)
    same(funcol.all_reduce(x, "sum", group).wait(), sum(rank_data(r) for r in range(ws)),
         "funcol.all_reduce")
    same(funcol.all_gather_tensor(x, 0, group).wait(), torch.cat([rank_data(r) for r in range(ws)]),
         "funcol.all_gather_tensor")
    big = rank_data(rank, n=ws * 2)
    same(funcol.reduce_scatter_tensor(big, "sum", 0, group).wait(),
         sum(rank_data(r, n=ws * 2) for r in range(ws)).chunk(ws)[rank], "funcol.reduce_scatter")
    out = funcol.all_to_all_single(big, None, None, group).wait()
    same(out, torch.cat([rank_data(r, n=ws * 2).chunk(ws)[rank] for r in range(ws)]),
         "funcol.all_to_all_single")
    # Several tensors at once: the *_coalesced paths.
    a, b = rank_data(rank, n=2), rank_data(rank, n=3) + 1
    ga, gb = funcol.all_gather_into_tensor_coalesced([a, b], group)
    same(funcol.wait_tensor(ga), torch.cat([rank_data(r, n=2) for r in range(ws)]),
         "all_gather_into_tensor_coalesced [0]")
    same(funcol.wait_tensor(gb), torch.cat([rank_data(r, n=3) + 1 for r in range(ws)]),
         "all_gather_into_tensor_coalesced [1]")
    ra, rb = funcol.reduce_scatter_tensor_coalesced(
        [rank_data(rank, n=ws * 2), rank_data(rank, n=ws) * 2], "sum", [0, 0], group)
    same(funcol.wait_tensor(ra), sum(rank_data(r, n=ws * 2) for r in range(ws)).chunk(ws)[rank],
         "reduce_scatter_tensor_coalesced [0]")
    same(funcol.wait_tensor(rb), sum(rank_data(r, n=ws) * 2 for r in range(ws)).chunk(ws)[rank],
         "reduce_scatter_tensor_coalesced [1]")
    return mesh


def two_d(rank, ws):
    mesh = init_device_mesh("cpu", (2, ws // 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]
    for name, sub in (("dp", dp), ("tp", tp)):
        check(dist.get_backend(sub.get_group()) == "mcr", f"mesh dim {name} is not on mcr")
    # Ranks are laid out row-major: tp groups are consecutive ranks, dp groups are strided.
    tp_ranks = dist.get_process_group_ranks(tp.get_group())
    dp_ranks = dist.get_process_group_ranks(dp.get_group())
    check(tp_ranks == [rank - rank % (ws // 2) + i for i in range(ws // 2)], f"tp ranks {tp_ranks}")
    check(dp_ranks == [rank % (ws // 2) + i * (ws // 2) for i in range(2)], f"dp ranks {dp_ranks}")
    mine = rank_data(rank, n=4)
    for name, sub, members in (("tp", tp, tp_ranks), ("dp", dp, dp_ranks)):
        p = DTensor.from_local(mine, sub, [Partial()])
        same(p.redistribute(sub, [Replicate()]).to_local(), sum(rank_data(r, n=4) for r in members),
             f"2-D mesh, dim {name}: Partial -> Replicate")
    # A tensor sharded over both dims, gathered whole.
    full = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)
    d = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    same(d.full_tensor(), full, "2-D mesh: Shard(0), Shard(1) -> full")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def tensor_parallel(rank, mesh):
    reference, model = MLP(), MLP()
    parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    g = torch.Generator().manual_seed(11)  # the same input on every rank, as TP expects
    x = torch.randn(4, 8, generator=g)
    out = model(x)
    want = reference(x)
    check(torch.allclose(out, want, rtol=1e-5, atol=1e-6),
          f"TP MLP output: max |diff| {(out - want).abs().max().item()}")
    out.sum().backward()
    want.sum().backward()
    for name, p in model.named_parameters():
        grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        ref = dict(reference.named_parameters())[name].grad
        check(torch.allclose(grad, ref, rtol=1e-5, atol=1e-6),
              f"TP MLP grad of {name}: max |diff| {(grad - ref).abs().max().item()}")


def main():
    rank, ws = setup()
    mesh = one_d(rank, ws)
    if ws % 2 == 0 and ws >= 4:
        two_d(rank, ws)
    tensor_parallel(rank, mesh)
    if rank == 0:
        print(f"DTensor on {ws} ranks: 1-D{' and 2-D' if ws >= 4 else ''} meshes, functional "
              "collectives and a tensor-parallel MLP match local references", flush=True)
    finish("test_dtensor")


if __name__ == "__main__":
    main()
