"""Registers the c10d backend "mcr" (torch 2.x) and brings the mcr runtime up once per process.

The world is formed once. Under mpirun, or srun with PMI, mcr forms it through MPI (with its own TCP
store for the backends' rendezvous); otherwise (torchrun, srun without PMI, or by hand with an
init_method) mcr forms it through the c10d store torch hands to the backend's creator, so torch's
store is the job's only rendezvous (mcr keeps its keys under "mcr/"). Every torch group is an mcr
communicator formed by the group's members alone when torch calls the creator on them
(new_group, DeviceMesh, use_local_synchronization alike). All mcr calls happen on one
communication thread inside the extension.
"""

import atexit
import os
import socket
import sys
import threading
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from . import _mcr_torch as _C

_lock = threading.Lock()
# How many default groups this process has created: torch names groups "0", "1", ... afresh after
# destroy_process_group(), so the generation keeps the mcr communicators of each apart.
_generation = -1


def launched_by_mpi():
    """Whether an MPI launcher (Open MPI's mpirun, Slurm with PMI) started this process."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return True
    # SLURM_MPI_TYPE=none (srun --mpi=none) means no PMI at all.
    return "SLURM_PROCID" in env and "RANK" not in env and (
        "PMIX_RANK" in env or "PMI_RANK" in env or env.get("SLURM_MPI_TYPE", "none") != "none")


def launched_by_srun_without_mpi():
    """srun without an MPI plugin: Slurm's variables give the ranks, nobody forms an MPI world."""
    env = os.environ
    return ("SLURM_PROCID" in env and "SLURM_NTASKS" in env and "RANK" not in env
            and "OMPI_COMM_WORLD_SIZE" not in env and not launched_by_mpi())


def _slurm_first_host(hostlist):
    """The first host of a Slurm host list: "node[01-04,07],gpu5" -> "node01"."""
    host, i = "", 0
    while i < len(hostlist) and hostlist[i] != ",":
        if hostlist[i] == "[":
            close = hostlist.find("]", i)
            first = hostlist[i + 1:close].replace("-", ",").split(",")[0] if close > 0 else ""
            if not first:
                raise ValueError(f"cannot read the first host of the Slurm node list '{hostlist}'")
            host, i = host + first, close + 1
        else:
            host, i = host + hostlist[i], i + 1
    return host


def slurm_master():
    """(MASTER_ADDR, MASTER_PORT) for an srun step without PMI, derived the way mcr's runtime derives
    its own store's (src/comm/bootstrap/launch.cpp), so that every task arrives at the same answer
    alone: MASTER_ADDR/MASTER_PORT when set; loopback when the step has one node, else its first
    node (where srun places task 0); the step's first reserved port (srun --resv-ports), else
    10000 + (job id % 2000) * 10 + step id % 10."""
    env = os.environ
    addr = env.get("MASTER_ADDR")
    if not addr:
        nodes = int(env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES", "0")))
        if nodes == 1:
            addr = "127.0.0.1"
        else:
            name = next((n for n in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
                         if env.get(n)), None)
            if name is None:
                raise RuntimeError("srun without PMI: no SLURM_STEP_NODELIST; set MASTER_ADDR")
            addr = _slurm_first_host(env[name])
    port = env.get("MASTER_PORT")
    if not port:
        resv = env.get("SLURM_STEP_RESV_PORTS")
        if resv:
            port = resv.replace(",", "-").split("-")[0]
        else:
            job = int(env.get("SLURM_JOB_ID", env.get("SLURM_JOBID", "-1")))
            if job < 0:
                raise RuntimeError("srun without PMI: SLURM_JOB_ID is not set; set MASTER_PORT")
            step = int(env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "0")))
            port = str(10000 + (job % 2000) * 10 + step % 10)
    return addr, int(port)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def ensure_runtime(store=None, rank=None, size=None):
    """Initialises mcr unless it already is; returns the world communicator handle.

    Under an MPI launcher, or without a store, mcr forms the world from the launcher's environment.
    Otherwise it forms it through torch's `store` as `rank` of `size`: every rank must pass the same
    store (the creator's, or the default store for groups formed before the default group is mcr).
    """
    with _lock:
        if _C.is_initialized():
            return _C.world()
        if launched_by_mpi() or store is None:
            return _C.init_runtime()
        if rank is None or size is None:
            rank, size = dist.get_rank(), dist.get_world_size()
        return _C.init_runtime(store, rank, size)


def _as_timedelta(t):
    if isinstance(t, timedelta):
        return t
    return timedelta(seconds=float(t))


def _create(opts, pg_options=None):
    """c10d creator (extended API), called by torch on the members of a group only."""
    global _generation
    ranks = list(opts.global_ranks_in_group)
    world = ensure_runtime(opts.store, opts.group_rank, opts.group_size)
    if not ranks:  # the default group: the world communicator
        with _lock:
            _generation += 1
        handle = world
    else:
        handle = _C.member_group(world, ranks, f"torch/{_generation}/{opts.group_id}")
    return _C.ProcessGroupMCR(handle, opts.group_rank, opts.group_size, _as_timedelta(opts.timeout))


def _shutdown():
    # Drop torch's process groups first: their operations in flight complete (shutdown() of each).
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - exiting anyway; the runtime still finalizes below
        pass
    _C.shutdown()


def devices():
    """The devices the backend is registered for: CPU, and CUDA when this build handles it."""
    return ["cpu", "cuda"] if _C.cuda_tensors_supported() else ["cpu"]


def register():
    if "MCR" in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend("mcr", _create, extended_api=True, devices=devices())
    atexit.register(_shutdown)
    _hook_uncaught_exceptions()


def _hook_uncaught_exceptions():
    """An uncaught exception ends this rank while its peers may wait for it (in a collective, or in
    finalize's check-in): tell the runtime, so that the exit handler's shutdown waits for nobody and,
    under mpirun or srun, leaves MPI to the launcher, which then ends the whole job at once instead
    of every rank waiting out its timeout (docs/reliability.md)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            _C.exiting_on_error(f"uncaught {kind.__name__}: {value}")
        except Exception:  # noqa: BLE001 - reporting the user's exception comes first
            pass
        previous(kind, value, tb)

    sys.excepthook = hook


def backend_of(group=None):
    """The ProcessGroupMCR behind a torch group (torch 2.x wraps backends in a ProcessGroup), or
    None when the group does not run on mcr."""
    pg = c10d._get_default_group() if group is None else group
    if isinstance(pg, _C.ProcessGroupMCR):
        return pg
    try:
        b = pg._get_backend(torch.device("cpu"))
    except (RuntimeError, AttributeError):
        return None
    return b if isinstance(b, _C.ProcessGroupMCR) else None
