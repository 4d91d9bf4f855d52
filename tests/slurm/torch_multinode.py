"""mcr.torch.init_processes under srun on several nodes (scripts/slurm up --hosts N): the ranks are
Slurm's, the tasks sit on at least two hosts with host names of their own, and collectives on the
world and on a group compute the values worked out here from the ranks alone. Without PMI torch's
store listens on the first node of the step (MASTER_ADDR is its name, which every host resolves);
with --mpi=pmix MPI forms the world, as under mpirun. Any wrong value or launch detail raises, so
the step fails (srun --kill-on-bad-exit)."""

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

import mcr.torch
from mcr.torch import _backend


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {dist.get_rank()} on {socket.gethostname()}: {what}")


def same(got, want, what):
    check(got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want),
          f"{what}: got {got.flatten()[:8].tolist()}... want {want.flatten()[:8].tolist()}...")


def first_host(hostlist):
    """The first host of a Slurm host list ("node[01-04,07],gpu5" -> "node01"), computed here
    independently of the runtime's reader that this test checks."""
    out, i = "", 0
    while i < len(hostlist) and hostlist[i] != ",":
        if hostlist[i] == "[":
            close = hostlist.index("]", i)
            out += hostlist[i + 1:close].split(",")[0].split("-")[0]
            i = close + 1
        else:
            out += hostlist[i]
            i += 1
    return out


def main():
    env = os.environ
    by_srun = _backend.launched_by_srun_without_mpi()
    by_mpi = _backend.launched_by_mpi()
    mcr.torch.init_processes("mcr", timeout=timedelta(seconds=60))
    rank, ws = dist.get_rank(), dist.get_world_size()
    check((rank, ws) == (int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])),
          f"rank {rank} of {ws}: {env['SLURM_PROCID']} of {env['SLURM_NTASKS']} expected")
    check(by_srun != by_mpi, f"launch: without PMI {by_srun}, with PMI {by_mpi}")
    nodes, node = int(env["SLURM_STEP_NUM_NODES"]), int(env["SLURM_NODEID"])
    check(nodes >= 2, f"the step has {nodes} node(s); this test needs several")
    if by_srun:
        first = first_host(env["SLURM_STEP_NODELIST"])
        check(env["MASTER_ADDR"] == first,
              f"MASTER_ADDR {env['MASTER_ADDR']!r}: the step's first node {first!r} expected")

    # Every rank's host name, gathered: as many distinct names as the step has nodes, and the
    # same name for ranks on the same node.
    name = socket.gethostname().encode()
    check(len(name) <= 64, f"host name {name!r} longer than 64 bytes")
    mine = torch.zeros(64, dtype=torch.uint8)
    mine[:len(name)] = torch.tensor(list(name), dtype=torch.uint8)
    names = [torch.zeros(64, dtype=torch.uint8) for _ in range(ws)]
    dist.all_gather(names, mine)
    hosts = [bytes(t[t != 0].tolist()).decode() for t in names]
    check(hosts[rank] == name.decode(), f"all_gather: my own host name came back as {hosts[rank]!r}")
    nodeids = torch.zeros(ws, dtype=torch.int64)
    nodeids[rank] = node
    dist.all_reduce(nodeids)
    by_node = {}
    for r in range(ws):
        by_node.setdefault(int(nodeids[r]), set()).add(hosts[r])
    check(len(by_node) == nodes and all(len(h) == 1 for h in by_node.values()) and
          len(set(hosts)) == nodes, f"host names by node id: {by_node}")

    # all_reduce large enough to cross the links in many segments; exact in float32.
    n = (1 << 18) + 3
    i = torch.arange(n, dtype=torch.int64)
    t = ((i % 7 + 1) * (rank + 1)).to(torch.float32)
    dist.all_reduce(t)
    same(t, ((i % 7 + 1) * (ws * (ws + 1) // 2)).to(torch.float32), "all_reduce sum on the world")
    t = torch.full((9,), float(rank))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    same(t, torch.full((9,), float(ws - 1)), "all_reduce max on the world")
    # Every rank gets the last rank's values, computed here from its rank alone.
    t = torch.arange(1000, dtype=torch.int32) * (rank + 1)
    dist.broadcast(t, src=ws - 1)
    same(t, torch.arange(1000, dtype=torch.int32) * ws, "broadcast from the last rank")
    # A group formed after init with one rank from each of the first two nodes.
    firsts = sorted({min(r for r in range(ws) if int(nodeids[r]) == k) for k in range(nodes)})
    group = dist.new_group(firsts)
    if rank in firsts:
        t = torch.full((3,), float(rank + 1), dtype=torch.float64)
        dist.all_reduce(t, group=group)
        same(t, torch.full((3,), float(sum(r + 1 for r in firsts)), dtype=torch.float64),
             f"all_reduce on the group {firsts} (first rank of each node)")
    dist.barrier()
    if rank == 0:
        print(f"torch_multinode: OK ({ws} ranks on {nodes} nodes {sorted(set(hosts))}, "
              f"{'srun without PMI' if by_srun else 'srun with PMI'})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
