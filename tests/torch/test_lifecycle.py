"""Group lifecycles that torch 2.x programs go through, on "mcr", each result checked:

- a group made with new_group(use_local_synchronization=True): only its members call new_group,
  and only they form its mcr communicator;
- a group made, used and destroyed, twice, with a collective on the world between;
- destroy_process_group() of everything, then init_process_group("mcr") again in the same process,
  and the new world works (mcr's runtime stays up between the two);
- when TORCH_DISTRIBUTED_DEBUG=DETAIL is set (a second ctest run), torch wraps the backend and
  compares sequence numbers and collective fingerprints across ranks before every collective: the
  same operations must run and give the same values, and mcr.torch.explain() must still find
  mcr's group behind torch's wrapper;
- init again is recognised under the same launcher as the first (srun: not as torchrun because
  the first init filled in RANK);
- explain() answers for a complex tensor (carried as pairs of its real type) and for the backend
  that `with mcr.torch.backend(...)` forces.
"""

import os

import torch

import torch.distributed as dist
import mcr.torch as mt

from common import check, data, finish, same, setup


def collectives(rank, ws, group=None, what=""):
    members = dist.get_process_group_ranks(group) if group is not None else list(range(ws))
    me = members.index(rank)
    t = data(rank, 6, torch.float32)
    dist.all_reduce(t, group=group)
    same(t, sum(data(r, 6, torch.float32) for r in members), f"{what} all_reduce")
    out = torch.empty(6 * len(members))
    dist.all_gather_into_tensor(out, data(rank, 6, torch.float32), group=group)
    same(out, torch.cat([data(r, 6, torch.float32) for r in members]), f"{what} all_gather")
    big = data(rank, 4 * len(members), torch.float32)
    small = torch.empty(4)
    dist.reduce_scatter_tensor(small, big, group=group)
    want = sum(data(r, 4 * len(members), torch.float32) for r in members)
    same(small, want.narrow(0, 4 * me, 4), f"{what} reduce_scatter")
    b = data(rank, 3, torch.int64)
    dist.broadcast(b, members[0], group=group)
    same(b, data(members[0], 3, torch.int64), f"{what} broadcast")
    dist.barrier(group=group)


def explained(what):
    check(mt._backend.backend_of() is not None, f"{what}: no mcr group behind the default group")
    answer = mt.explain("all_reduce", tensor=torch.zeros(4, dtype=torch.complex64))
    check(answer["backend"] != "", f"{what}: explain of a complex64 all_reduce: {answer}")
    plain = mt.explain("all_reduce", 32, torch.float32)
    check(answer["backend"] == plain["backend"],
          f"{what}: complex64 x 4 is explained as {answer['backend']}, fp32 x 8 as "
          f"{plain['backend']}")
    # Forced to another backend of the world than auto's choice, explain names it: the first of
    # the candidates that can run the op (a build or launch may have one only: nothing to force).
    for name in [b for b, _, _ in plain["steps"] if b and b != plain["backend"]]:
        with mt.backend(name):
            forced = mt.explain("all_reduce", 32, torch.float32)
        if forced["backend"]:
            check(forced["backend"] == name, f"{what}: explain inside mt.backend('{name}'): {forced}")
            break


def main():
    launcher = mt._backend.launch_info()["launcher"]
    rank, ws = setup()
    detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "") == "DETAIL"
    collectives(rank, ws, what="world")
    explained("world")

    # Formed by its members alone: the others never call new_group for it.
    members = [0, ws - 1]
    if rank in members:
        local = dist.new_group(members, use_local_synchronization=True)
        collectives(rank, ws, local, "local-synchronization group")
    dist.barrier()

    for round_ in range(2):
        g = dist.new_group(list(range(ws)))
        collectives(rank, ws, g, f"group of round {round_}")
        dist.destroy_process_group(g)
        collectives(rank, ws, what=f"world after destroying group {round_}")

    dist.destroy_process_group()
    check(not dist.is_initialized(), "still initialised after destroy_process_group()")
    again = mt._backend.launch_info()["launcher"]
    check(again == launcher, f"after the first init the launcher reads {again}, before it {launcher}")
    mt.init_processes()
    check(dist.get_backend() == "mcr", f"re-initialised on {dist.get_backend()}")
    explained("re-initialised world")
    collectives(rank, ws, what="re-initialised world")
    g = dist.new_group(list(range(ws)))
    collectives(rank, ws, g, "group after re-initialisation")
    if rank == 0:
        print(f"lifecycle{' (TORCH_DISTRIBUTED_DEBUG=DETAIL)' if detail else ''}: local-"
              "synchronization group, destroyed groups, destroy and init again: all values right",
              flush=True)
    finish("test_lifecycle")


if __name__ == "__main__":
    main()
