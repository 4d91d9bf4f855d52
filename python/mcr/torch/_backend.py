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
import hashlib
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
# (generation, ranks) -> how many groups of those ranks this rank has made (_create).
_member_groups = {}
# An uncaught exception is ending this process (_hook_uncaught_exceptions).
_exiting_on_error = False
# Why this process asked to exit with an error status (sys.exit(1), sys.exit("message")), or None.
_exit_error = None


# The variables fill_launcher_env() filled in (RANK & co. under mpirun or srun), with the values it
# gave them, and launch_info() as it read before. Once RANK is set the environment reads as a
# torchrun-style launch, which under srun would hide Slurm (and PMI) from what follows: a later
# init_processes() (after destroy_process_group()) would reuse the previous world's store address.
_filled_in = {}
_launch_before_fill = {}


def launch_info(store_given=True):
    """The launcher's placement of this process, read by the runtime's own reader (mcr::launch_info,
    src/comm/bootstrap/launch.cpp), so that Python and C++ cannot disagree: {"launcher": "single" |
    "mpirun" | "srun" | "torchrun", "rank", "size", "local_rank", "local_size", "master_addr",
    "master_port", "mpi_world"}. `store_given` (the default here: torch brings its own store) makes
    torchrun's MASTER_ADDR/MASTER_PORT optional; under srun without PMI master_addr/master_port are
    where rank 0's store listens, from MASTER_ADDR/MASTER_PORT or derived from the step. After
    fill_launcher_env(), the launch as it was read before."""
    ours = any(os.environ.get(k) == v for k, v in _filled_in.items())
    if ours and store_given in _launch_before_fill:
        return dict(_launch_before_fill[store_given])
    return _C.launch_info(store_given)


def fill_launcher_env(env_init=True):
    """RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE, where torchrun's are absent, from the launcher
    that started this process (mpirun, srun), as the runtime reads it. A process started without
    a launcher (`python train.py`) is a world of one, as the runtime reads it too; for torch's
    env:// (`env_init`) it also gets a store address on loopback (MASTER_ADDR/MASTER_PORT, where
    unset), which torch would otherwise ask for."""
    info = launch_info()
    if info["launcher"] not in ("mpirun", "srun", "single"):
        return
    if not _launch_before_fill:
        _launch_before_fill.update({True: info, False: _C.launch_info(False)})
    values = {"RANK": info["rank"], "WORLD_SIZE": info["size"], "LOCAL_RANK": info["local_rank"],
              "LOCAL_WORLD_SIZE": info["local_size"]}
    if info["launcher"] == "single" and env_init:
        values["MASTER_ADDR"] = "127.0.0.1"
        if "MASTER_PORT" not in os.environ:
            values["MASTER_PORT"] = _free_port()
    for dst, value in values.items():
        if dst not in os.environ:
            os.environ[dst] = str(value)
            _filled_in[dst] = os.environ[dst]


def launched_by_mpi():
    """Whether an MPI launcher (Open MPI's mpirun, Slurm with PMI) started this process."""
    return launch_info()["mpi_world"]


def launched_by_srun_without_mpi():
    """srun without an MPI plugin: Slurm's variables give the ranks, nobody forms an MPI world."""
    info = launch_info()
    return info["launcher"] == "srun" and not info["mpi_world"]


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def ensure_runtime(store=None, rank=None, size=None, timeout=None):
    """Initialises mcr unless it already is; returns the world communicator handle.

    Under an MPI launcher, or without a store, mcr forms the world from the launcher's environment.
    Otherwise it forms it through torch's `store` as `rank` of `size`: every rank must pass the same
    store (the creator's, or the default store for groups formed before the default group is mcr).
    `timeout` (torch's for the group being created) bounds the formation, as torch's own backends'
    (capped by MCR_TIMEOUT), and becomes the runtime's default.
    """
    limit = _as_timedelta(timeout) if timeout is not None else timedelta(0)
    with _lock:
        if _C.is_initialized():
            return _C.world()
        # The runtime reads the environment as it is now (RANK filled in included): ask the same
        # reader, not launch_info()'s answer from before the fill, so that a launch the runtime
        # takes for a torchrun-style one (srun with PMI and MASTER_PORT set) gets torch's store.
        if _C.launch_info(True)["mpi_world"] or store is None:
            return _C.init_runtime(timeout=limit)
        if rank is None or size is None:
            rank, size = dist.get_rank(), dist.get_world_size()
        return _C.init_runtime(store, rank, size, limit)


# The longest timeout handed to the runtime: 100 years. A program may pass timedelta.max for
# "never", which no clock can add to now, and which overflows on its way into C++ (nanoseconds).
_LONGEST_TIMEOUT = timedelta(days=365 * 100)


def _as_timedelta(t):
    if not isinstance(t, timedelta):
        t = timedelta(seconds=float(t))
    return min(t, _LONGEST_TIMEOUT)


def _check_first_group(ranks):
    """mcr forms its world once, from the first group torch creates on it, and maps every later
    group's global ranks into that world. With another backend's default group, a first group of
    some ranks only would, under torchrun, make a world of those ranks (later groups would fail or,
    where the ranks happen to fit, pair the wrong processes) and, under mpirun, make its members wait
    in MPI's world formation, with no timeout, until every other rank creates an "mcr" group too.
    Refused on its members, before anything blocks. (Under mpirun,
    mcr.torch.init_processes brings mcr up on every rank first, so any group may come first.)"""
    if _C.is_initialized() or not ranks or not dist.is_initialized():
        return
    size = dist.get_world_size()
    if sorted(ranks) != list(range(size)):
        raise RuntimeError(
            f"mcr: the first group on backend 'mcr' has ranks {sorted(ranks)} of {size}, but mcr "
            f"forms its world once, from the first group, and it must hold every rank: create an "
            f"'mcr' group of every rank first (dist.new_group(backend='mcr')), or make 'mcr' the "
            f"default backend (init_process_group('mcr'))")


def _create(opts, pg_options=None):
    """c10d creator (extended API), called by torch on the members of a group only."""
    global _generation
    ranks = list(opts.global_ranks_in_group)
    _check_first_group(ranks)
    timeout = _as_timedelta(opts.timeout)
    world = ensure_runtime(opts.store, opts.group_rank, opts.group_size, timeout)
    if not ranks:  # the default group: the world communicator, then one of its own
        # The world is formed once per process: a later default group is made of its ranks, in
        # its order. One that renumbers them (an in-process restart that left a rank out of the
        # middle) would wait for the wrong peers until its timeout: refused on the renumbered
        # ranks (the others cannot tell, and still wait for the missing ones).
        if opts.group_rank != world.rank or opts.group_size > world.size:
            raise RuntimeError(
                f"mcr: a default group in which this process is rank {opts.group_rank} of "
                f"{opts.group_size}, but mcr's world, formed once per process, has it as rank "
                f"{world.rank} of {world.size}: a default group after destroy_process_group() "
                f"must keep every rank's number (it may leave out the last ranks); start new "
                f"processes to renumber them")
        with _lock:
            _generation += 1
            generation = _generation
        # A later default group (init_process_group after destroy_process_group) gets fresh
        # connections, as torch's own backends do: the world may be aborted by an operation that
        # timed out, or its connections closed by a peer whose own did (an in-process restart
        # after a fault). member_group forms it from the world even then.
        if generation == 0:
            handle = world
        else:
            handle = _C.member_group(world, list(range(opts.group_size)), f"torch/{generation}/world",
                                     timeout)
    else:
        # Not torch's group name: a group made with use_local_synchronization is named from its
        # ranks and the number of groups this rank holds, which differs between members that were
        # not in the same earlier groups (a non-member of a group holds none for it). Members
        # agree on the ranks and on how many groups of those ranks they made before.
        with _lock:
            made = _member_groups.get((_generation, tuple(ranks)), 0)
            _member_groups[(_generation, tuple(ranks))] = made + 1
        # The ranks by their digest: every member reads every other member's key from the store.
        digest = hashlib.sha1("_".join(map(str, ranks)).encode(), usedforsecurity=False).hexdigest()
        key = f"torch/{_generation}/{len(ranks)}/{digest}/{made}"
        handle = _C.member_group(world, ranks, key, timeout)
    return _C.ProcessGroupMCR(handle, opts.group_rank, opts.group_size, timeout)


def _shutdown():
    global _exiting_on_error
    if not _exiting_on_error and _exit_error is not None:
        # sys.exit with an error status (no excepthook runs for SystemExit): an exit on an error
        # all the same, which its peers may be waiting on.
        _exiting_on_error = True
        try:
            _C.exiting_on_error(_exit_error)
        except Exception:  # noqa: BLE001 - exiting anyway; the shutdown below still runs
            pass
    if _exiting_on_error:
        # Nobody waits for the operations in flight, and a peer may never match them (a receive
        # posted ahead, an unwaited all_reduce): destroying the groups would wait for each until
        # its timeout. The communication thread stops at once and finalize abandons them.
        _C.shutdown(abandon=True)
        return
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
    _keep_new_groups_from_splitting_mcr()
    atexit.register(_shutdown)
    _hook_uncaught_exceptions()


def _keep_new_groups_from_splitting_mcr():
    """mcr's backend splits (split_group, and DeviceMesh once init_process_group bound a device),
    so torch's new_group would also take it as the group to split from: it would hand it to an
    NCCL group as `split_from` (which takes only an NCCL backend: TypeError on every member) and
    ask the non-members of every new group to split it with no color. Groups on mcr are formed by
    their members alone, so new_group never needs one: torch's choice of a source skips mcr's."""
    original = getattr(c10d, "_get_split_source", None)
    if original is None or getattr(original, "_skips_mcr", False):
        return

    def get_split_source(pg):
        source = original(pg)
        return None if isinstance(source, _C.ProcessGroupMCR) else source

    get_split_source._skips_mcr = True
    c10d._get_split_source = get_split_source


def _hook_uncaught_exceptions():
    """An uncaught exception ends this rank while its peers may wait for it (in a collective, or in
    finalize's check-in): tell the runtime, so that the exit handler's shutdown waits for nobody and,
    under mpirun or srun, leaves MPI to the launcher, which then ends the whole job at once instead
    of every rank waiting out its timeout (docs/reliability.md)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        global _exiting_on_error
        # At an interactive prompt (python -i, a REPL) an uncaught exception ends the statement,
        # not the process: the rank goes on, and its exit is a clean one.
        if hasattr(sys, "ps1") or sys.flags.interactive:
            previous(kind, value, tb)
            return
        _exiting_on_error = True
        try:
            _C.exiting_on_error(f"uncaught {kind.__name__}: {value}")
        except Exception:  # noqa: BLE001 - reporting the user's exception comes first
            pass
        previous(kind, value, tb)

    sys.excepthook = hook
    _hook_error_exits()


def _hook_error_exits():
    """sys.exit(1) ends the rank as an uncaught exception does, but Python runs no excepthook for
    SystemExit: the exit handler then destroyed the groups and checked in at finalize while the
    peers waited for this rank in a collective, each side for the whole timeout. The status is
    noted here (sys.exit is called through the module, as argparse and sys.exit(main()) call it),
    and the exit handler treats the exit as one on an error. Only the main thread's: in another
    thread sys.exit ends that thread alone. A `raise SystemExit(1)` written out is not seen; a
    SystemExit caught and then left behind still counts at exit."""
    original = sys.exit
    if getattr(original, "_mcr_notes_status", False):
        return

    def exit(status=None):  # noqa: A001 - replaces sys.exit under its own name
        global _exit_error
        interactive = hasattr(sys, "ps1") or sys.flags.interactive
        # In another thread, sys.exit ends that thread alone: the process goes on.
        main = threading.current_thread() is threading.main_thread()
        if status is not None and status != 0 and main and not interactive:
            _exit_error = f"sys.exit({status!r})"
        original(status)

    exit._mcr_notes_status = True
    sys.exit = exit


def backend_of(group=None, device="cpu"):
    """The ProcessGroupMCR behind a torch group for `device`'s tensors (torch 2.x wraps backends in
    a ProcessGroup, one per device type: "cpu:gloo,cuda:mcr"), or None when the group does not run
    on mcr there."""
    pg = c10d._get_default_group() if group is None else group
    if isinstance(pg, _C.ProcessGroupMCR):
        return pg
    try:
        b = pg._get_backend(torch.device(device))
    except (RuntimeError, AttributeError):
        return None
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the backend in a checking wrapper (one level per wrap).
    while b is not None and not isinstance(b, _C.ProcessGroupMCR):
        b = getattr(b, "wrapped_pg", None)
    return b


def runs_on_mcr(group=None):
    """Whether torch runs `group` on mcr for host or for CUDA tensors."""
    return backend_of(group) is not None or backend_of(group, "cuda") is not None
