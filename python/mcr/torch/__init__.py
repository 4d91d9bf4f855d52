"""mcr.torch: mcr as a torch.distributed backend, and an MCR-DL-style API with per-call backends.

    import mcr.torch                       # registers the c10d backend "mcr"
    mcr.torch.init_processes()             # or torch.distributed.init_process_group("mcr")
    mcr.torch.all_reduce(t)                # mcr picks the backend for this op and size
    mcr.torch.all_reduce(t, backend="mpi") # or the caller does
    with mcr.torch.backend("gloo"):        # for every op in the block, DDP's included
        ...
"""

from ._backend import register as _register
from .api import *  # noqa: F401,F403 - the public surface is api's

_register()


def shutdown():
    """Finalises the runtime now (it also happens at exit). No mcr operation may follow."""
    from ._backend import _shutdown
    _shutdown()
