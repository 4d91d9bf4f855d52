"""How init_process_group("mcr") forms the world. Without an MPI launcher (torchrun, srun without
PMI) mcr forms it through torch's own store: it starts no TCP store of its own and needs no
MCR_STORE_TOKEN. Under mpirun (or srun --mpi=pmix) MPI forms it, and torch's store listens at the
address of mcr's store on rank 0. Either way the world, and groups formed later, carry operations.
Under srun the ranks must be Slurm's."""

import os
import sys
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch
from common import check, finish, same, setup
from mcr.torch import _mcr_torch as _C


def expected_launch(env):
    """The launcher and placement that the environment names, read here independently of the
    runtime's reader: (launcher, rank, size, local rank)."""
    if "OMPI_COMM_WORLD_SIZE" in env:
        return ("mpirun", int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]),
                int(env["OMPI_COMM_WORLD_LOCAL_RANK"]))
    if "SLURM_PROCID" in env and "RANK" not in env and (
            "SLURM_STEP_ID" in env or "SLURM_STEPID" in env):
        return ("srun", int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
                int(env["SLURM_LOCALID"]))
    return ("torchrun", int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0)))


def main():
    # One reader of the launcher's environment for C++ and Python (mcr::launch_info).
    want = expected_launch(dict(os.environ))
    launch = mcr.torch._backend.launch_info()
    got = (launch["launcher"], launch["rank"], launch["size"], launch["local_rank"])
    check(got == want, f"launch_info {launch}: {want} expected")
    by_mpi = mcr.torch._backend.launched_by_mpi()
    # srun with PMI and MASTER_ADDR/MASTER_PORT set by the job script: torch's store listens there,
    # RANK is filled in, and the runtime, reading RANK, forms the world through torch's store.
    # Under mpirun MPI forms it whatever MASTER_PORT says.
    mpi_forms = by_mpi and (want[0] == "mpirun" or "MASTER_PORT" not in os.environ)
    os.environ.pop("MCR_STORE_TOKEN", None)  # never needed with torch's store
    by_srun = mcr.torch._backend.launched_by_srun_without_mpi()
    if sys.argv[1:] in (["file"], ["file-size"]):
        # A file:// rendezvous (torch's FileStore) in place of env://: torch needs the rank and
        # world size passed for it, which init_processes() takes from the launcher. Every worker
        # of one torchrun has the same parent, the agent. "file-size": the URL names the world
        # size alone, and init_processes adds the rank to it (torch refuses rank= beside such a
        # URL, and without it said "rank parameter missing").
        path = os.path.join(tempfile.gettempdir(), f"mcr-{sys.argv[1]}-init-{os.getppid()}")
        query = f"?world_size={os.environ['WORLD_SIZE']}" if sys.argv[1] == "file-size" else ""
        mcr.torch.init_processes("mcr", timeout=timedelta(seconds=120),
                                 init_method=f"file://{path}{query}")
        rank, ws = dist.get_rank(), dist.get_world_size()
    elif sys.argv[1:] == ["env"]:
        # env://, torch's default, named: the same as no init_method under every launcher.
        mcr.torch.init_processes("mcr", timeout=timedelta(seconds=120), init_method="env://")
        rank, ws = dist.get_rank(), dist.get_world_size()
    else:
        rank, ws = setup()
    info = _C.rendezvous()
    check(mcr.torch.get_local_rank() == want[3], f"get_local_rank {mcr.torch.get_local_rank()}")
    check((int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) == (rank, ws),
          f"RANK/WORLD_SIZE {os.environ['RANK']}/{os.environ['WORLD_SIZE']} after init")
    if "SLURM_PROCID" in os.environ:
        check((rank, ws) == (int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])),
              f"rank {rank} of {ws} under srun: {os.environ['SLURM_PROCID']} of "
              f"{os.environ['SLURM_NTASKS']} expected")
    if by_srun:
        check(os.environ["MASTER_ADDR"] == "127.0.0.1", "srun on one node: torch's store on loopback")
    if mpi_forms:
        check(info["rendezvous"] == "tcp store", f"rendezvous under mpirun: {info}")
        check(info["world_exchange"] == "mpi", f"world exchange under mpirun: {info}")
        check(info["store_host"] == os.environ["MASTER_ADDR"],
              f"torch's store at mcr's store address: {info} vs {os.environ['MASTER_ADDR']}")
    else:
        check(info == {"rendezvous": "torch store", "world_exchange": "store", "store_host": ""},
              f"rendezvous under torchrun or srun without PMI: {info}")

    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    same(t, torch.full((5,), float(ws * (ws + 1) // 2)), "all_reduce on the world")
    # Every rank gets the last rank's values, computed here from its rank alone.
    t = torch.arange(6, dtype=torch.int32) * (rank + 1)
    dist.broadcast(t, src=ws - 1)
    same(t, torch.arange(6, dtype=torch.int32) * ws, "broadcast from the last rank")
    # A group formed after init: its communicator is formed through the same store.
    first = dist.new_group([0])
    if rank == 0:
        t = torch.full((2,), 3.0)
        dist.all_reduce(t, group=first)
        same(t, torch.full((2,), 3.0), "all_reduce on a group of rank 0")
    everyone = dist.new_group(list(range(ws)))
    t = torch.ones(4, dtype=torch.int64)
    dist.all_reduce(t, group=everyone)
    same(t, torch.full((4,), ws, dtype=torch.int64), "all_reduce on a whole-world group")
    finish("test_rendezvous")


if __name__ == "__main__":
    main()
