"""Shared by the torch tests: launch-independent setup and deterministic, exactly representable data.

Inputs are small integers (exact in every dtype, bf16 included, and their sums too), so results are
compared with torch.equal against values computed here from every rank's input, independently of
any backend.
"""

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64]
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def setup(backend="mcr", timeout=timedelta(seconds=120)):
    mcr.torch.init_processes(backend, timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def data(rank, n, dtype, salt=0):
    """Element i of rank r: a small integer that depends on r, i and salt (1..7 for products)."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * 3 + rank * 5 + salt) % 7 + 1
    return v.to(dtype)


def noncontiguous(t):
    """The same values as `t` in a non-contiguous view (every other element of a wider buffer)."""
    wide = torch.zeros(t.numel() * 2, dtype=t.dtype)
    view = wide[::2]
    view.copy_(t.reshape(-1))
    assert not view.is_contiguous() or t.numel() <= 1
    return view


def comm_thread_counts():
    """The communication thread's counters (posted, issued_by_caller, driven_by_waiter, ...)."""
    return mcr.torch._backend._C.comm_thread_counts()


def wait_for_count(key, before, seconds):
    """Waits until comm_thread_counts()[key] differs from `before`, at most `seconds`; whether it
    did (a thread has posted its operation, a waiter is driving)."""
    deadline = time.monotonic() + seconds
    while comm_thread_counts()[key] == before and time.monotonic() < deadline:
        time.sleep(0.001)
    return comm_thread_counts()[key] != before


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {dist.get_rank()}: {what}")


def same(got, want, what):
    check(got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want),
          f"{what}: got {got.flatten()[:8].tolist()}... want {want.flatten()[:8].tolist()}...")


def finish(name):
    dist.barrier()
    if dist.get_rank() == 0:
        print(f"{name}: OK", flush=True)
    sys.stdout.flush()
    os.environ.setdefault("MCR_TEST_DONE", "1")
