"""torch's split_group on "mcr", and the paths torch takes once init_process_group bound a device
(device_id=): DeviceMesh forms its sub-groups with split_group, and new_group looks for a group to
split from. Every sum is checked against one computed here from the members' ranks.

The test runs on CPU tensors, so the default group's bound device is set by hand (to cuda:0, which
no operation here touches) and, for DeviceMesh, torch.cuda.is_available is patched for the mesh's
creation only: torch then takes the path it takes on a GPU machine with device_id bound (a spy
checks that it did). test_cuda.py binds a real device where a GPU is present.

Cases: split_group into halves; a split of a split group whose group ranks are not its global
ranks; ranks in no split get None; the split's timeout kept; new_group with a bound device (and
no group to split from on mcr); a 2-D DeviceMesh at 4 ranks; and members that pass different
splits: the member that waits for a peer that never comes raises TimeoutError within the split's
timeout, and the world still works after it (a later group of the same ranks from the world would
not: that member's count of such groups is ahead, so this case comes last)."""

import sys
import time
from datetime import timedelta
from unittest import mock

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.distributed.device_mesh import init_device_mesh

import mcr.torch
from common import check, finish, same, setup


def summed(group, rank):
    """all_reduce of (rank + 1) over `group`; checked against the sum over its global ranks."""
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, group=group)
    want = float(sum(r + 1 for r in dist.get_process_group_ranks(group)))
    same(t, torch.full((3,), want), f"all_reduce over {dist.get_process_group_ranks(group)}")


def halves(rank, ws):
    h = ws // 2
    low, high = list(range(h)), list(range(h, ws))
    g = dist.split_group(split_ranks=[low, high])
    mine = low if rank < h else high
    check(g is not None, "split_group gave no group to a member")
    check(dist.get_process_group_ranks(g) == mine,
          f"split group ranks {dist.get_process_group_ranks(g)}, want {mine}")
    check(dist.get_backend(g) == "mcr", f"split group on {dist.get_backend(g)}")
    summed(g, rank)


def nested(rank, ws):
    # A parent whose group ranks are not its global ranks (ranks 1.. at 3 ranks or more):
    # split_group takes the parent's group ranks, so its group ranks [0, last] are global ranks
    # [1, ws - 1].
    parent_ranks = list(range(1, ws)) if ws >= 3 else list(range(ws))
    parent = dist.split_group(split_ranks=[parent_ranks])
    if rank not in parent_ranks:
        check(parent is None, "a rank in no split got a group")
        return
    n = len(parent_ranks)
    sub = [0, n - 1] if n >= 3 else [n - 1]
    g = dist.split_group(parent_pg=parent, split_ranks=[sub])
    want = [parent_ranks[i] for i in sub]
    if rank in want:
        check(g is not None and dist.get_process_group_ranks(g) == want,
              f"split of a split group: ranks {g and dist.get_process_group_ranks(g)}, want {want}")
        summed(g, rank)
    else:
        check(g is None, "a rank in no split of a split group got a group")


def left_out(rank, ws):
    members = [0, ws - 1] if ws >= 3 else [ws - 1]
    g = dist.split_group(split_ranks=[members])
    if rank in members:
        check(g is not None, "a member got no group")
        summed(g, rank)
    else:
        check(g is None, "a rank in no split got a group")


def timeout_kept(rank, ws):
    g = dist.split_group(split_ranks=[list(range(ws))], timeout=timedelta(seconds=7))
    b = mcr.torch._backend.backend_of(g)
    check(b is not None and b.timeout == timedelta(seconds=7), f"split group timeout {b.timeout}")
    summed(g, rank)


def new_group_with_bound_device(rank, ws):
    # new_group takes no group to split from on mcr: torch would hand it to an NCCL group (which
    # takes an NCCL backend only) and ask the non-members of every new group to split it.
    check(c10d._get_split_source(dist.group.WORLD) is None, "new_group would split from mcr")
    g = dist.new_group([0])
    if rank == 0:
        summed(g, rank)
    else:
        check(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member got a group")


def mesh_2d(rank, ws):
    seen = []
    real = c10d.split_group

    def spy(*args, **kwargs):
        seen.append(kwargs.get("split_ranks"))
        return real(*args, **kwargs)

    with mock.patch("torch.cuda.is_available", return_value=True), \
            mock.patch("torch.distributed.device_mesh.split_group", spy):
        mesh = init_device_mesh("cpu", (2, ws // 2), mesh_dim_names=("dp", "tp"))
    check(len(seen) == 2, f"DeviceMesh called split_group {len(seen)} times, want once per dim")
    dp_ranks = [r for r in range(ws) if r % (ws // 2) == rank % (ws // 2)]
    tp_ranks = [r for r in range(ws) if r // (ws // 2) == rank // (ws // 2)]
    for name, want in (("dp", dp_ranks), ("tp", tp_ranks)):
        g = mesh[name].get_group()
        check(dist.get_process_group_ranks(g) == want,
              f"mesh dim {name}: ranks {dist.get_process_group_ranks(g)}, want {want}")
        summed(g, rank)


def different_splits(rank, ws):
    # Rank 0 asks for a group of every rank; the others each for a group of their own. Rank 0
    # waits for members that never come and raises within the split's timeout; the others form
    # theirs alone.
    split = [list(range(ws))] if rank == 0 else [[r] for r in range(ws)]
    start = time.monotonic()
    try:
        g = dist.split_group(split_ranks=split, timeout=timedelta(seconds=3))
    except RuntimeError as e:
        took = time.monotonic() - start
        check(rank == 0, f"rank {rank} raised: {e}")
        check(isinstance(e, mcr.torch._backend._C.TimeoutError) and "had not arrived" in str(e),
              f"rank 0 raised something else than mcr's TimeoutError: {type(e)}: {e}")
        check(took < 3 + 10, f"rank 0 raised after {took:.1f} s (timeout 3 s)")
    else:
        check(rank != 0, "rank 0 formed a group of ranks that never came")
        summed(g, rank)
    summed(dist.group.WORLD, rank)


def main():
    if not mcr.torch._backend._C.cuda_tensors_supported():
        # torch's split_group asks the parent group for its CUDA backend, which a build of the
        # binding without CUDA does not register.
        print("SKIP: a build without CUDA tensors: split_group needs a CUDA backend", flush=True)
        sys.exit(0)
    rank, ws = setup()
    # What init_process_group(device_id=torch.device("cuda", i)) sets; no GPU is touched here.
    dist.group.WORLD.bound_device_id = torch.device("cuda", 0)
    halves(rank, ws)
    nested(rank, ws)
    left_out(rank, ws)
    timeout_kept(rank, ws)
    new_group_with_bound_device(rank, ws)
    if ws == 4:
        mesh_2d(rank, ws)
    different_splits(rank, ws)
    # barrier() runs on the bound device, which this machine does not have.
    dist.group.WORLD.bound_device_id = None
    finish("test_split_group")


if __name__ == "__main__":
    main()
