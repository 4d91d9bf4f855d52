"""examples/deepspeed/train.py's arguments: DeepSpeed's own launcher appends --local_rank=N, which
is accepted; --moe with --pipe is refused before anything starts (the pipeline would drop the MoE
auxiliary loss), and so are --ep without --moe (it trained the dense model) and an --ep that does
not divide the experts; the expert-parallel size, the timeout of DeepSpeed's groups, and experts
that start distinct."""

import sys

import train

args = train.finish_args(train.parser().parse_args(["--local_rank=1", "--steps", "4"]))
if args.local_rank != 1:
    sys.exit(f"FAIL: --local_rank=1 read as {args.local_rank}")
try:
    train.finish_args(train.parser().parse_args(["--moe", "4", "--pipe", "2"]))
    sys.exit("FAIL: --moe 4 --pipe 2 was accepted")
except SystemExit as e:
    if "--moe with --pipe" not in str(e.code):
        sys.exit(f"FAIL: --moe with --pipe refused with {e.code!r}")
for argv, said in ((["--ep", "2"], "needs --moe"),
                   (["--moe", "4", "--ep", "3"], "must divide the number of experts")):
    try:
        train.finish_args(train.parser().parse_args(argv))
        sys.exit(f"FAIL: {' '.join(argv)} was accepted")
    except SystemExit as e:
        if said not in str(e.code):
            sys.exit(f"FAIL: {' '.join(argv)} refused with {e.code!r}")

# The expert-parallel size: by default the largest that divides both the experts and the world
# (it was the world size: 8 ranks with 4 experts failed in DeepSpeed's assertion); an --ep that
# does not divide the world is refused by name.
for moe, world, ep in ((4, 2, 2), (4, 4, 4), (4, 8, 4), (4, 3, 1), (6, 4, 2)):
    a = train.finish_args(train.parser().parse_args(["--moe", str(moe)]))
    if train.expert_parallel_size(a, world) != ep:
        sys.exit(f"FAIL: --moe {moe} at {world} ranks: expert parallel size "
                 f"{train.expert_parallel_size(a, world)}, expected {ep}")
try:
    train.expert_parallel_size(
        train.finish_args(train.parser().parse_args(["--moe", "4", "--ep", "2"])), 3)
    sys.exit("FAIL: --ep 2 at 3 ranks was accepted")
except SystemExit as e:
    if "must divide the number of ranks" not in str(e.code):
        sys.exit(f"FAIL: --ep 2 at 3 ranks refused with {e.code!r}")

# --timeout reaches the groups DeepSpeed creates with new_group(ranks) and no timeout (they had
# torch's 30 minutes); a timeout the caller gives is kept; installing twice does not nest.
import datetime  # noqa: E402

import torch.distributed as dist  # noqa: E402

given = []
dist.new_group = lambda ranks=None, timeout=None, **kw: given.append(timeout)
t = datetime.timedelta(seconds=42)
train.groups_default_to(datetime.timedelta(seconds=1))
train.groups_default_to(t)
dist.new_group([0, 1])
dist.new_group(ranks=[0, 1])
dist.new_group([0, 1], datetime.timedelta(seconds=5))
dist.new_group([0, 1], timeout=datetime.timedelta(seconds=6))
if given != [t, t, datetime.timedelta(seconds=5), datetime.timedelta(seconds=6)]:
    sys.exit(f"FAIL: new_group's timeouts {given}")

# DeepSpeed copies one expert into every slot: the example draws each afresh, so the experts of a
# layer differ, from one rank's to the next's too, and the same on every build.
import torch  # noqa: E402

import model as gpt  # noqa: E402


def experts(ep_rank):
    torch.manual_seed(0)
    block = gpt.Block(gpt.Shape(experts=4, ep_size=2))
    dist.is_initialized, dist.get_rank = (lambda: True), (lambda: ep_rank)
    try:
        torch.manual_seed(1)
        gpt.distinct_experts(block.ffn, gpt.Shape(experts=4, ep_size=2))
    finally:
        dist.is_initialized = lambda: False
    return [torch.cat([p.detach().flatten() for p in e.parameters()])
            for e in block.ffn.deepspeed_moe.experts.deepspeed_experts]


mine, again, next_rank = experts(0), experts(0), experts(1)
if len(mine) != 2:
    sys.exit(f"FAIL: {len(mine)} local experts, expected 2")
everyone = mine + next_rank
for i in range(len(everyone)):
    for j in range(i):
        if torch.equal(everyone[i], everyone[j]):
            sys.exit(f"FAIL: experts {j} and {i} (ranks 0 and 1's, 2 each) start identical")
if not all(torch.equal(a, b) for a, b in zip(mine, again)):
    sys.exit("FAIL: the experts differ between two builds from the same seed")
print("train.py arguments: OK")
