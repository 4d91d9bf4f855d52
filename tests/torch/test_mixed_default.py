"""torch's gloo as the default group and "mcr" only for a subgroup (and the whole world): mcr is
brought up from the new_group wrapper, through torch's default store, on every rank."""

import torch
import torch.distributed as dist

import mcr.torch as mt
from common import check, finish, same


def main():
    mt.init_processes("gloo")
    rank, ws = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "gloo", "default backend")
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
