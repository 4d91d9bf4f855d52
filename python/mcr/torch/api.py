"""The MCR-DL / deepspeed.comm-style API: torch.distributed's signatures plus a per-call backend.

Every operation takes ``backend=None`` (mcr's selection: rules, tuning table, defaults) or a
backend name ("mpi", "gloo", "nccl"). The choice must be the same on every rank, like the other
arguments. ``with mcr.torch.backend("gloo"):`` forces a backend for a whole block, including the
operations DDP issues inside it. Groups default to the world group; use ``new_group`` for others.
"""

import contextlib
import os
import threading
import urllib.parse
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from . import _backend
from . import _mcr_torch as _C

__all__ = [
    "ReduceOp", "backend", "init_processes", "is_initialized", "destroy_process_group", "get_rank",
    "get_world_size", "get_local_rank", "get_world_group", "get_global_rank",
    "get_all_ranks_from_group", "new_group", "set_timeout", "broadcast", "all_reduce", "all_reduce_coalesced",
    "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all_single", "all_to_all", "gather", "scatter", "send", "recv", "isend", "irecv",
    "barrier", "explain", "has_all_gather_into_tensor", "has_reduce_scatter_tensor",
    "has_all_reduce_coalesced",
]

ReduceOp = dist.ReduceOp

_OP_NAMES = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "broadcast": "broadcast",
    "reduce": "reduce", "all_gather": "all_gather", "all_gather_into_tensor": "all_gather",
    "gather": "gather", "scatter": "scatter", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "all_to_all": "all_to_all_v",
    "all_to_all_single": "all_to_all", "send": "send", "recv": "recv", "barrier": "barrier",
}
_DTYPES = {
    torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16",
    torch.int8: "i8", torch.uint8: "u8", torch.bool: "u8", torch.int32: "i32", torch.int64: "i64",
    # Complex tensors travel as pairs of their real type, the same bytes.
    torch.complex64: "fp32", torch.complex128: "fp64",
}
_REDUCE = {
    ReduceOp.SUM: "sum", ReduceOp.PRODUCT: "prod", ReduceOp.MIN: "min", ReduceOp.MAX: "max",
    ReduceOp.BAND: "band", ReduceOp.BOR: "bor", ReduceOp.BXOR: "bxor", ReduceOp.AVG: "avg",
}


# The blocks of backend() open now, in the order they were entered, and the override before the
# first of them. The override in force is the last-entered open block's: blocks of two threads may
# end in either order, and each must take only its own name away (restoring "the value before me"
# would, when the earlier block ends first, leave the later block's name forced for good).
_override_lock = threading.Lock()
_open_overrides = []  # [(token, name)]
_override_before = ""


@contextlib.contextmanager
def backend(name):
    """Runs every mcr operation issued inside the block on backend `name` (None: automatic)."""
    global _override_before
    if name is not None and not isinstance(name, str):
        # Refused before the block is recorded as open: a block left open by a failed entry would
        # keep its name forced, and break every later block's exit.
        raise TypeError(f"mcr.torch.backend: name = {name!r} must be a backend's name (str) or "
                        f"None, not {type(name).__name__}")
    token = object()
    with _override_lock:
        before = _C.backend_override() if not _open_overrides else _override_before
        _C.set_backend_override(name or "")
        _override_before = before
        _open_overrides.append((token, name or ""))
    try:
        yield
    finally:
        with _override_lock:
            _open_overrides[:] = [o for o in _open_overrides if o[0] is not token]
            _C.set_backend_override(_open_overrides[-1][1] if _open_overrides else _override_before)


def _first(tensors):
    return tensors[0] if tensors else None


def _run(name, group, tensor, fn, device_of=None):
    """`fn` with backend `name` forced (None: mcr's selection). The name chooses among mcr's
    backends: where torch runs the group on another backend for `tensor`'s device (a group of
    "cpu:gloo,cuda:mcr" for a host tensor; for a call without a tensor, the device `device_of()`
    names, where given) it would be ignored, so it is refused. A rank outside the group calls as
    torch lets it: nothing runs there."""
    if name is None:
        return fn()
    if group is not None and c10d._rank_not_in_group(group):
        return fn()
    device = (tensor.device.type if tensor is not None
              else device_of() if device_of is not None else None)
    on_mcr = (_backend.backend_of(group, device) is not None if device is not None
              else _backend.runs_on_mcr(group))
    if not on_mcr:
        where = f" for {device} tensors" if device is not None else ""
        raise ValueError(
            f"mcr.torch: backend={name!r} chooses among mcr's backends, but the group "
            f"{'(the default group)' if group is None else repr(group)} runs on "
            f"'{dist.get_backend(group)}'{where}, which would ignore it; pass a group created "
            f"with backend 'mcr' (new_group(..., backend='mcr')), or leave backend=None")
    with backend(name):
        return fn()


def _with_rank_and_size(init_method):
    """(init_method, rank= and world_size= for init_process_group): torch reads RANK and
    WORLD_SIZE from the environment for env:// alone; tcp:// and file:// need them passed or in
    the URL. torch refuses the arguments when the URL names either, so a URL that names one gets
    the other added to it."""
    if init_method is None or init_method.startswith("env://"):
        return init_method, {}
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return init_method, {}
    given = urllib.parse.parse_qs(urllib.parse.urlsplit(init_method).query)
    env = {"rank": os.environ["RANK"], "world_size": os.environ["WORLD_SIZE"]}
    if not given.keys() & env.keys():
        return init_method, {k: int(v) for k, v in env.items()}
    missing = {k: v for k, v in env.items() if k not in given}
    if missing:
        init_method += ("&" if "?" in init_method else "?") + urllib.parse.urlencode(missing)
    return init_method, {}


# The torch store address init_processes() agreed on under an MPI launcher, so that a later
# init_processes() (after destroy_process_group()) agrees on a fresh one instead of taking it for
# the user's: torch's env:// store is multi-tenant, so the same port in the same process can reach
# the previous world's store server, whose keys (the previous groups' Gloo addresses, which the
# new groups' names repeat) would be read as the new ones.
_agreed_master = None


_agreements = 0


def _agree(world, value, timeout):
    """Rank 0's `value` on every rank of `world`. Once torch has used the world (an earlier default
    group), over fresh connections made from it: an operation that timed out there aborted it on
    some ranks only, and a broadcast on it raised "communicator aborted" on those while the others
    waited in it until their timeout."""
    global _agreements
    if _backend._generation < 0:
        return _C.broadcast_string(world, value)
    # Counted once it worked: a rank whose agreement timed out (a peer late) and that calls
    # init_processes again must meet the late peer under the same key.
    channel = _C.member_group(world, list(range(world.size)), f"torch/agree/{_agreements + 1}",
                              _backend._as_timedelta(timeout))
    agreed = _C.broadcast_string(channel, value)
    _agreements += 1
    return agreed


def init_processes(dist_backend="mcr", timeout=timedelta(minutes=30), init_method=None,
                   device_id=None):
    """Forms the world once and initialises torch.distributed's default group on `dist_backend`.

    Launchers: mpirun, srun with PMI (mcr forms the world through MPI; torch's store then listens
    on rank 0 at the address of mcr's own store, on a port rank 0 picks), torchrun (RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT; mcr forms its world through torch's store), srun without
    PMI (the same, with RANK & co. from SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS),
    SLURM_LOCALID and MASTER_ADDR/
    MASTER_PORT, unless set, derived from the step: _backend.launch_info) or by hand with the
    same variables. `dist_backend` may be "gloo" to run torch's own backend for comparison.
    `init_method` (tcp://, file://) is passed to torch with the rank and world size the launcher
    gives, unless its URL names them; env:// is the same as None. `device_id` (a CUDA device:
    the one mcr's NCCL uses, the launcher's local rank modulo the devices) is passed to torch as
    init_process_group's: torch then forms DeviceMesh's groups with split_group.
    """
    if timeout is None:
        timeout = timedelta(minutes=30)  # torch's default for a CPU group
    if not isinstance(timeout, timedelta):
        raise TypeError(f"mcr.torch.init_processes: timeout = {timeout!r} must be a "
                        f"datetime.timedelta (as init_process_group's), not "
                        f"{type(timeout).__name__}")
    if dist.is_initialized():
        return
    # The launch is recognised before RANK & co. are filled in from the launcher's variables: under
    # srun, a RANK already set would make both this check and mcr's own launch detection take the
    # job for a torchrun-style one.
    global _agreed_master
    # env:// is torch's default: named or not, torch reads MASTER_ADDR & co., which the launcher
    # branches below provide.
    env_init = init_method is None or init_method.startswith("env://")
    ours = _agreed_master is not None and _agreed_master == (
        os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
    if env_init and _backend.launched_by_mpi() and (
            ours or "MASTER_PORT" not in os.environ):
        world = _backend.ensure_runtime(timeout=timeout)
        port = _agree(world, str(_backend._free_port()) if world.rank == 0 else "", timeout)
        # torch's store runs on rank 0, where mcr's own store listens: at the address every rank
        # has already reached (loopback on one host; else MCR_STORE_HOST's interface address or
        # the default route's, never MCR_STORE_HOST itself, which may name an interface).
        os.environ["MASTER_ADDR"] = _C.rendezvous()["store_host"]
        os.environ["MASTER_PORT"] = port
        _agreed_master = (os.environ["MASTER_ADDR"], port)
    elif env_init and _backend.launched_by_srun_without_mpi():
        # No MPI to agree on a port with: every task derives torch's store address from the step
        # (MASTER_ADDR/MASTER_PORT when set), as the runtime derives its own store's.
        info = _backend.launch_info()
        os.environ["MASTER_ADDR"] = info["master_addr"]
        os.environ["MASTER_PORT"] = str(info["master_port"])
        if _C.is_initialized():
            # A re-init: the runtime keeps the torch store it formed the world through, with the
            # previous groups' keys, which the new groups' names repeat (a Gloo group then
            # connected to a closed address): agree on a fresh port over the world, rank 0's.
            world = _C.world()
            os.environ["MASTER_PORT"] = _agree(
                world, str(_backend._free_port()) if world.rank == 0 else "", timeout)
    _backend.fill_launcher_env(env_init)  # RANK & co. for torch, from mpirun or srun (or alone)
    init_method, rank_and_size = _with_rank_and_size(init_method)
    dist.init_process_group(dist_backend, timeout=timeout, init_method=init_method,
                            device_id=device_id, **rank_and_size)


def is_initialized():
    return dist.is_initialized()


def destroy_process_group(group=None):
    dist.destroy_process_group(group)


def get_rank(group=None):
    return dist.get_rank(group)


def get_world_size(group=None):
    return dist.get_world_size(group)


def get_local_rank():
    """This process's rank on its host, from its launcher (mpirun, srun, torchrun)."""
    return _backend.launch_info()["local_rank"]


def get_world_group():
    return c10d.GroupMember.WORLD


def get_global_rank(group, group_rank):
    return dist.get_global_rank(group, group_rank) if group is not None else group_rank


def get_all_ranks_from_group(group=None):
    if group is None:
        return list(range(dist.get_world_size()))
    return c10d.get_process_group_ranks(group)


def new_group(ranks=None, timeout=None, **kwargs):
    """A group of `ranks` (global ranks) on mcr; torch.distributed.new_group's other arguments
    (use_local_synchronization, group_desc, ...) pass through."""
    return dist.new_group(ranks, timeout=timeout, backend="mcr", **kwargs)


def set_timeout(timeout, group=None):
    """The timeout of `group`'s later operations (the default group's with None), capped by
    MCR_TIMEOUT as `timeout=` of new_group is; operations already issued keep theirs. torch's
    `_set_pg_timeout` does this for its own Gloo and NCCL groups only (it warns and leaves other
    backends as they are). Local: set it alike on every member."""
    _require_member(group, "set_timeout")
    b = _backend.backend_of(group) or _backend.backend_of(group, "cuda")
    if b is None:
        raise ValueError(f"mcr.torch.set_timeout: the group {group!r} does not run on backend "
                         f"'mcr'")
    t = _backend._as_timedelta(timeout)
    if t <= timedelta(0):
        raise ValueError(f"mcr.torch.set_timeout: timeout = {t} must be positive")
    b.set_timeout(t)


def broadcast(tensor, src, group=None, async_op=False, backend=None):
    return _run(backend, group, tensor,
                lambda: dist.broadcast(tensor, src, group=group, async_op=async_op))


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False, backend=None):
    return _run(backend, group, tensor,
                lambda: dist.all_reduce(tensor, op=op, group=group, async_op=async_op))


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False, backend=None):
    return _run(backend, group, _first(tensors),
                lambda: dist.all_reduce_coalesced(tensors, op=op, group=group,
                                                  async_op=async_op))


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False, backend=None):
    return _run(backend, group, tensor,
                lambda: dist.reduce(tensor, dst, op=op, group=group, async_op=async_op))


def all_gather(tensor_list, tensor, group=None, async_op=False, backend=None):
    return _run(backend, group, tensor,
                lambda: dist.all_gather(tensor_list, tensor, group=group, async_op=async_op))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False, backend=None):
    return _run(backend, group, input_tensor,
                lambda: dist.all_gather_into_tensor(output_tensor, input_tensor,
                                                    group=group, async_op=async_op))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False, backend=None):
    return _run(backend, group, output,
                lambda: dist.reduce_scatter(output, input_list, op=op, group=group,
                                            async_op=async_op))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False,
                          backend=None):
    return _run(backend, group, output,
                lambda: dist.reduce_scatter_tensor(output, input, op=op, group=group,
                                                   async_op=async_op))


def all_to_all_single(output, tensor, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False, backend=None):
    return _run(backend, group, tensor, lambda: dist.all_to_all_single(
        output, tensor, output_split_sizes, input_split_sizes, group=group, async_op=async_op))


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False, backend=None):
    return _run(backend, group, _first(input_tensor_list),
                lambda: dist.all_to_all(output_tensor_list, input_tensor_list,
                                        group=group, async_op=async_op))


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False, backend=None):
    return _run(backend, group, tensor,
                lambda: dist.gather(tensor, gather_list, dst, group=group, async_op=async_op))


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False, backend=None):
    return _run(backend, group, tensor,
                lambda: dist.scatter(tensor, scatter_list, src, group=group,
                                     async_op=async_op))


def send(tensor, dst, group=None, tag=0, backend=None):
    return _run(backend, group, tensor, lambda: dist.send(tensor, dst, group=group, tag=tag))


def recv(tensor, src=None, group=None, tag=0, backend=None):
    if src is None:
        raise ValueError("mcr recv needs src: receiving from any source is not supported")
    return _run(backend, group, tensor, lambda: dist.recv(tensor, src, group=group, tag=tag))


def isend(tensor, dst, group=None, tag=0, backend=None):
    return _run(backend, group, tensor, lambda: dist.isend(tensor, dst, group=group, tag=tag))


def irecv(tensor, src=None, group=None, tag=0, backend=None):
    if src is None:
        raise ValueError("mcr irecv needs src: receiving from any source is not supported")
    return _run(backend, group, tensor, lambda: dist.irecv(tensor, src, group=group, tag=tag))


def _barrier_device(group):
    """The device type torch's barrier runs `group`'s barrier on (torch.distributed.barrier: the
    device bound at init, else the host where there is no accelerator or the group has a host
    backend, else the accelerator)."""
    g = c10d._get_default_group() if group is None else group
    bound = getattr(g, "bound_device_id", None)
    if bound is not None:
        return bound.type
    accelerator = torch._C._get_accelerator()
    if accelerator.type == "cpu" or c10d._get_object_coll_device(g) == "cpu":
        return "cpu"
    return accelerator.type


def barrier(group=None, async_op=False, backend=None):
    return _run(backend, group, None, lambda: dist.barrier(group=group, async_op=async_op),
                device_of=lambda: _barrier_device(group))


def has_all_gather_into_tensor():
    return True


def has_reduce_scatter_tensor():
    return True


def has_all_reduce_coalesced():
    return True


def _require_member(group, what):
    """Raises where this rank is outside `group` (torch hands such a rank a placeholder group)."""
    if group is not None and c10d._rank_not_in_group(group):
        raise ValueError(f"mcr.torch.{what}: this rank (global rank {dist.get_rank()}) is not a "
                         f"member of the group: call it on the group's members only")


def _mcr_group(group, device):
    _require_member(group, "explain")
    pg = _backend.backend_of(group, device)
    if pg is None:
        raise ValueError(f"mcr.torch.explain: the group runs on '{dist.get_backend(group)}', not "
                         f"mcr, for {device} tensors")
    return pg


def explain(op, nbytes=None, dtype=torch.float32, reduce_op=ReduceOp.SUM, group=None, tensor=None):
    """Which backend mcr picks for `op` on a message of `nbytes` (the op's global size, as in
    nccl-tests: the full output of all_gather) and why. Pass `tensor` instead of nbytes/dtype to use
    its size, type and device (CPU unless a CUDA tensor is given): the tensor that holds the op's
    global size, all_gather's and gather's output, reduce_scatter's and scatter's input, not a
    rank's part (its size is the group's size times smaller, and may be answered by another
    backend). The answer is for the
    asynchronous (i*) form, the form the backend issues every op in, and for the backend that an
    enclosing ``with mcr.torch.backend(...)`` forces, as the operation would be issued. Returns {"backend", "source", "steps": [(backend, chosen, reason), ...],
    "composed_steps": [...]}; composed_steps is empty unless the backend is hier, whose steps each
    say their level, op, bytes, times, backend, source and reason."""
    device = "cpu"
    if tensor is not None:
        dtype = tensor.dtype
        nbytes = tensor.numel() * tensor.element_size()
        device = "cuda" if tensor.is_cuda else "cpu"
    if op not in _OP_NAMES:
        raise ValueError(f"mcr.torch.explain: unknown operation '{op}' (one of {sorted(_OP_NAMES)})")
    if dtype not in _DTYPES:
        raise ValueError(f"mcr.torch.explain: dtype {dtype} is not carried by mcr")
    if reduce_op not in _REDUCE:
        raise ValueError(f"mcr.torch.explain: reduce_op = {reduce_op!r} is not one of "
                         f"torch.distributed.ReduceOp's SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, "
                         f"AVG")
    if nbytes is None and _OP_NAMES[op] != "barrier":
        raise ValueError(f"mcr.torch.explain: '{op}' needs nbytes (the operation's global size "
                         f"in bytes) or tensor")
    if int(nbytes or 0) < 0:
        raise ValueError(f"mcr.torch.explain: nbytes = {nbytes} must not be negative")
    return _C.explain(_mcr_group(group, device), _OP_NAMES[op], _DTYPES[dtype], int(nbytes or 0),
                      _REDUCE[reduce_op], device)
