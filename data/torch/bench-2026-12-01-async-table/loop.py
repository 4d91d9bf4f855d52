# One synchronous 4-byte all_reduce in a loop: "plain" (mcr only), "group" (a gloo group exists),
# "interleave" (50 gloo all_reduces before each block), to see what moves the per-call time.
import time, sys, torch, torch.distributed as dist
import mcr.torch as mt
mt.init_processes("mcr")
mode = sys.argv[1]
t = torch.ones(1)
g = dist.new_group(backend="gloo") if mode != "plain" else None
def loop(n):
    dist.barrier()
    s = time.perf_counter()
    for _ in range(n): dist.all_reduce(t)
    return (time.perf_counter() - s) / n * 1e6
res = []
for r in range(10):
    if mode == "interleave":
        for _ in range(50): dist.all_reduce(t, group=g)
    res.append(loop(2000))
if dist.get_rank() == 0: print(mode, " ".join(f"{x:.1f}" for x in res), flush=True)
