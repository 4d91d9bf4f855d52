"""A subset of torch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped with torch) run against the "mcr" backend.

Each test spawns WORLD_SIZE processes that initialise the default group with init_method=file://,
so mcr comes up torchrun-style (Gloo only) with its world formed through torch's store.
Usage: run_torch_suite.py [-v] [test names...]  (default: TESTS below)."""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "stubs"))  # expecttest
os.environ.setdefault("BACKEND", "mcr")
os.environ.setdefault("WORLD_SIZE", "3")  # group tests need more than 2 ranks
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="mcr-torch-suite-"))
for var in ("RANK", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE"):
    os.environ.pop(var, None)

import torch  # noqa: E402

import mcr.torch  # noqa: E402,F401 - registers the backend
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Declared before the suite is imported: its skip decorators read these sets at import time.
DistTestCases.backend_feature["plugin"].add("mcr")
DistTestCases.backend_feature["ddp"].add("mcr")
DistTestCases.backend_feature["subgroup"].add("mcr")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestMcrBackend(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # fork: a spawned child re-imports torch (~10 s each here); the parent never starts mcr.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


# Chosen: every collective and point-to-point family on the world, a strided subgroup and a full
# group, async work, object collectives' building blocks. Left out, with the reason:
#   *_cuda, *_multigpu, *_nccl, SyncBatchNorm, *_gpu, test_average_parameters: need CUDA (Debian's torch is CPU-only)
#   *_complex: mcr has no complex element type; test_sparse_*: no sparse tensors
#   test_send_recv_any_source*: mcr has no receive-from-any-source
#   *_profiler: profiler record names are backend-specific
#   gated by the suite on named backends, so they skip for any plugin: all_to_all* ("Only MPI
#     supports"), all_reduce_coalesced* and *_object* ("requires gloo/nccl"), test_get_future and
#     the accumulate_gradients hooks ("mpi, nccl and gloo"), barrier/monitored_barrier timeouts
#     ("Only gloo"), DDP comm-hook parity ("CUDA devices"), test_backend_*group ("gloo, nccl"); tests/torch/test_*.py cover these ops
#   test_DistributedDataParallel*: the suite's process launcher turns on ReplicatedTensor DDP,
#     whose import fails on Python 3.11 with torch 1.13 (a dataclass with a mutable default) for
#     every backend; test_ddp.py covers DDP
#   test_new_subgroups needs 4 ranks; this runs at WORLD_SIZE=3 to keep the suite short
TESTS = [
    "test_get_rank", "test_get_backend", "test_get_rank_size_group",
    "test_get_rank_size_full_group", "test_destroy_group", "test_destroy_full_group",
    "test_broadcast", "test_broadcast_group", "test_broadcast_full_group",
    "test_reduce_sum", "test_reduce_max", "test_reduce_group_min", "test_reduce_full_group_product",
    "test_reduce_sum_twice",
    "test_all_reduce_sum", "test_all_reduce_sum_async", "test_all_reduce_product",
    "test_all_reduce_min", "test_all_reduce_max", "test_all_reduce_group_sum",
    "test_all_reduce_group_product", "test_all_reduce_full_group_max",
    "test_scatter", "test_scatter_checks", "test_scatter_group", "test_scatter_full_group",
    "test_gather", "test_gather_checks", "test_gather_group", "test_gather_full_group",
    "test_all_gather", "test_all_gather_group", "test_all_gather_full_group",
    "test_all_gather_coalesced_simple", "test_all_gather_coalesced_group",
    "test_all_gather_coalesced_with_empty",
    "test_barrier", "test_barrier_group", "test_barrier_full_group",
    "test_send_recv", "test_send_recv_with_tag", "test_isend", "test_irecv",
]

if __name__ == "__main__":
    import unittest

    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    names = args or TESTS
    suite = unittest.TestSuite(TestMcrBackend(n) for n in names)
    verbosity = 2 if "-v" in sys.argv else 1
    result = unittest.TextTestRunner(verbosity=verbosity).run(suite)
    skipped = len(result.skipped)
    print(f"torch suite on mcr: {result.testsRun - len(result.failures) - len(result.errors) - skipped}"
          f" passed, {len(result.failures) + len(result.errors)} failed, {skipped} skipped of "
          f"{result.testsRun}", flush=True)
    if result.wasSuccessful():
        print("run_torch_suite: OK", flush=True)
    sys.exit(0 if result.wasSuccessful() else 1)
