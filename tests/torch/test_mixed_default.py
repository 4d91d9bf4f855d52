"""torch's gloo as the default group and "mcr" only for a subgroup (and the whole world): mcr is
brought up from the new_group wrapper, through torch's default store, on every rank."""

import sys

import torch
import torch.distributed as dist

import mcr.torch as mt
from common import check, finish, same


def subgroup_first(rank, ws):
    """A first mcr group of some ranks only is refused on its members with what to do instead (it
    would make an mcr world of those ranks alone); the non-members are not asked; afterwards the
    world group and the same subgroup work."""
    sub = list(range(1, ws))
    try:
        g = dist.new_group(sub, backend="mcr")
        check(rank not in sub, f"a first mcr group of ranks {sub} was accepted")
        check(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member got a group")
    except RuntimeError as e:
        check(rank in sub, f"a non-member raised: {e}")
        check(f"has ranks {sub} of {ws}" in str(e) and "new_group(backend='mcr')" in str(e),
              f"message: {e}")


def main():
    mt.init_processes("gloo")
    rank, ws = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "gloo", "default backend")
    if "--subgroup-first" in sys.argv:
        subgroup_first(rank, ws)
    world = dist.new_group(backend="mcr")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=world)
    same(t, torch.full((3,), float(sum(range(ws)))), "all_reduce on an mcr world group")
    odd = list(range(1, ws, 2))
    g = dist.new_group(odd, backend="mcr")
    if rank in odd:
        t = torch.ones(2)
        dist.all_reduce(t, group=g)
        same(t, torch.full((2,), float(len(odd))), "all_reduce on the odd ranks")
    check(mt.explain("all_reduce", 8, group=world)["backend"], "explain on a subgroup")
    try:
        mt.explain("all_reduce", 8)  # the default group is gloo's
        check(False, "explain on a gloo group did not raise")
    except ValueError as e:
        check("gloo" in str(e), f"explain message: {e}")
    finish("test_mixed_default")


if __name__ == "__main__":
    main()
