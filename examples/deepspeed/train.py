"""Trains the GPT-style model of model.py with DeepSpeed on the CPU, over torch's gloo or mcr.

    export PYTHONPATH=build/python:examples/deepspeed   # .venv/bin/python: torch and DeepSpeed
    mpirun -np 2 .venv/bin/python examples/deepspeed/train.py --dist mcr-auto --zero 3 --steps 20
    mpirun -np 4 .venv/bin/python examples/deepspeed/train.py --dist mcr-auto --moe 4 --ep 4 --zero 2
    mpirun -np 2 .venv/bin/python examples/deepspeed/train.py --dist torch-gloo --pipe 2
    .venv/bin/torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 \\
        examples/deepspeed/train.py --dist mcr-auto --zero 3

--dist torch-gloo   torch.distributed's own gloo backend (the baseline)
--dist mcr-auto     backend "mcr", mcr's selection (rules / MCR_TUNING table / defaults)
--dist mcr-mpi      backend "mcr", every operation forced to MPI
--dist mcr-gloo     backend "mcr", every operation forced to mcr's Gloo

Variants: --zero 1|2|3 (stage 3 partitions the parameters at construction with zero.Init and
prefetches them), --moe E --ep P (every block's MLP is a DeepSpeed MoE layer of E experts split
over P ranks), --pipe S (deepspeed.pipe over S stages, ZeRO 0 or 1). fp32 throughout; AdamW is
torch's (`"torch_adam": true`), so no DeepSpeed optimizer op is compiled.

Prints one line on rank 0: median step time, tokens/s (all ranks), the communication share (time
the training thread spends inside collectives or waiting for them, over step time, averaged over
ranks) and the loss curve. --json FILE writes the same as JSON; --dump DIR writes each rank's
losses and final parameters (rank<N>.pt) for comparison between stacks.
"""

import argparse
import contextlib
import datetime
import functools
import json
import math
import os
import select
import statistics
import sys
import threading
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import mcr.torch as mt  # noqa: E402

import model as gpt  # noqa: E402

DISTS = ("torch-gloo", "mcr-auto", "mcr-mpi", "mcr-gloo")
FORCED = {"mcr-mpi": "mpi", "mcr-gloo": "gloo"}


def parser(description=__doc__):
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dist", choices=DISTS + ("mcr",), default="mcr-auto",
                   help="communication stack (mcr = mcr-auto)")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=None,
                   help="ZeRO stage (default 3; 1 with --pipe, 2 with --moe)")
    p.add_argument("--moe", type=int, default=0, metavar="E", help="experts per MoE layer")
    p.add_argument("--ep", type=int, default=0, metavar="P",
                   help="expert parallel size (default: the largest that divides both the "
                        "experts and the world size)")
    p.add_argument("--pipe", type=int, default=0, metavar="S", help="pipeline stages")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per rank and micro-batch")
    p.add_argument("--gas", type=int, default=0,
                   help="micro-batches per step (default 1; 2 x stages with --pipe)")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ffn", type=int, default=0, help="MLP width (default 4 x d-model)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bucket", type=float, default=5e5,
                   help="ZeRO reduce/all-gather bucket and stage-3 prefetch size, elements")
    p.add_argument("--timeout", type=float, default=1800,
                   help="timeout of every process group, DeepSpeed's own included, s")
    p.add_argument("--skip-shm-op", action="store_true",
                   help="do not JIT-build DeepSpeed's shared-memory all_reduce op (inference only)")
    p.add_argument("--turns", metavar="DIR:first|second",
                   help="take turns step by step with another run using the same DIR (A/B timing)")
    p.add_argument("--json", metavar="FILE", help="rank 0 writes the result here")
    p.add_argument("--dump", metavar="DIR", help="each rank writes its losses and parameters here")
    # DeepSpeed's own launcher (`deepspeed train.py ...`) appends --local_rank=N; LOCAL_RANK, which
    # it also sets, is what the run reads.
    p.add_argument("--local_rank", type=int, help=argparse.SUPPRESS)
    return p


def finish_args(args):
    if args.dist == "mcr":
        args.dist = "mcr-auto"
    if args.zero is None:
        args.zero = 1 if args.pipe else 2 if args.moe else 3
    if args.gas == 0:
        args.gas = 2 * args.pipe if args.pipe else 1
    if args.ffn == 0:
        args.ffn = 4 * args.d_model
    if args.pipe and args.zero > 1:
        sys.exit("deepspeed.pipe supports ZeRO stage 0 or 1 only")
    if args.moe and args.zero == 3:
        sys.exit("DeepSpeed-MoE does not support ZeRO stage 3")
    if args.moe and args.pipe:
        # The pipeline's blocks pass activations only: the MoE layers' load-balancing loss would
        # be dropped, and the run would train another objective than the MoE variant's.
        sys.exit("--moe with --pipe: the pipeline variant cannot carry the MoE auxiliary loss; "
                 "run them separately")
    if args.ep and not args.moe:
        # shape_of() reads --ep only for an MoE model: a dense run with --ep would train the dense
        # model under a name that says nothing of it.
        sys.exit(f"--ep {args.ep} needs --moe E: expert parallelism splits the experts of an MoE "
                 "model")
    if args.ep < 0 or (args.ep and args.moe % args.ep):
        sys.exit(f"--ep {args.ep} with --moe {args.moe}: the expert-parallel size must divide the "
                 "number of experts")
    if args.warmup < 0 or args.steps <= args.warmup:
        sys.exit(f"--steps {args.steps} with --warmup {args.warmup}: at least one timed step is "
                 "needed after the warm-up (and --warmup >= 0)")
    return args


class CommClock:
    """Time the calling thread spends in torch.distributed collectives: the whole call when it is
    synchronous, wait() when it is asynchronous. DeepSpeed looks the functions up in
    torch.distributed when it issues an operation (all_gather_into_tensor and
    reduce_scatter_tensor once, when its communication backend is created), so install() must run
    before deepspeed.init_distributed() and deepspeed.initialize()."""

    OPS = ("all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
           "all_to_all_single", "all_to_all", "gather", "scatter", "send", "recv", "isend",
           "irecv", "barrier", "_all_gather_base", "_reduce_scatter_base")

    def __init__(self):
        self.seconds = 0.0
        # How deep this thread is in timed calls: torch's own send calls isend and waits, recv
        # irecv, _all_gather_base all_gather_into_tensor; only the outermost call counts.
        self._depth = threading.local()

    def install(self):
        c10d = dist.distributed_c10d
        for name in self.OPS:
            fn = getattr(dist, name, None)
            if fn is None or getattr(fn, "_timed", False):
                continue
            timed = self._wrap(fn)
            setattr(dist, name, timed)
            if getattr(c10d, name, None) is fn:
                setattr(c10d, name, timed)

    def _wrap(self, fn):
        clock = self

        def timed(*args, **kwargs):
            depth = getattr(clock._depth, "n", 0)
            if depth > 0:  # inside another timed call, which counts this one's time
                return fn(*args, **kwargs)
            clock._depth.n = depth + 1
            t = time.perf_counter()
            try:
                work = fn(*args, **kwargs)
            finally:
                clock._depth.n = depth
                clock.seconds += time.perf_counter() - t
            return work if work is None or not hasattr(work, "wait") else _TimedWork(work, clock)

        timed._timed = True
        timed.__wrapped__ = fn
        return timed


class _TimedWork:
    def __init__(self, work, clock):
        self._work, self._clock = work, clock

    def wait(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self._work.wait(*args, **kwargs)
        finally:
            self._clock.seconds += time.perf_counter() - t

    def __getattr__(self, name):
        return getattr(self._work, name)


def init_dist(args, clock=None):
    """Forms the world on the chosen stack, then lets DeepSpeed take the default group over.

    mcr.torch.init_processes() reads mpirun's, srun's or torchrun's environment and sets RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, which DeepSpeed otherwise finds only
    through mpi4py; deepspeed.init_distributed() then reuses the default group."""
    import deepspeed
    if args.skip_shm_op:
        # Used by inference_all_reduce only, and only when LOCAL_SIZE says every rank is local.
        # (deepspeed.comm's attribute "torch" is the torch package, hence sys.modules.)
        sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
    timeout = datetime.timedelta(seconds=args.timeout)
    groups_default_to(timeout)
    if args.dist == "torch-gloo":
        mt.init_processes("gloo", timeout=timeout)
    else:
        mt.init_processes("mcr", timeout=timeout)
    if clock is not None:
        clock.install()
    deepspeed.init_distributed(dist_backend=dist.get_backend(), timeout=timeout)
    forced = FORCED.get(args.dist)
    # The override covers every mcr operation issued while it is active, DeepSpeed's included.
    return mt.backend(forced) if forced else contextlib.nullcontext()


def groups_default_to(timeout):
    """Makes `timeout` the default of torch.distributed.new_group. DeepSpeed creates its groups
    (ZeRO's data-parallel group, the MoE expert and expert-data-parallel groups, the pipeline's)
    with new_group(ranks) and no timeout, which torch takes as its 30-minute default: a rank that
    stalls would keep its peers waiting there for 30 minutes, whatever --timeout says. DeepSpeed
    looks new_group up in torch.distributed at each call, so replacing it there reaches them."""
    new_group = getattr(dist.new_group, "torch_new_group", dist.new_group)  # once, if called again

    @functools.wraps(new_group)
    def new_group_with_timeout(*a, **kw):
        if len(a) < 2 and kw.get("timeout") is None:  # timeout is new_group's second parameter
            kw["timeout"] = timeout
        return new_group(*a, **kw)

    new_group_with_timeout.torch_new_group = new_group
    dist.new_group = new_group_with_timeout


def ds_config(args):
    zero = {"stage": args.zero}
    bucket = int(args.bucket)
    if args.zero >= 1:
        zero.update(reduce_bucket_size=bucket, allgather_bucket_size=bucket, overlap_comm=True,
                    contiguous_gradients=True)
    if args.zero == 3:
        # Every parameter partitioned (no persistence threshold), fetched ahead of use.
        zero.update(stage3_param_persistence_threshold=0, stage3_prefetch_bucket_size=bucket,
                    stage3_max_live_parameters=4 * bucket, stage3_max_reuse_distance=4 * bucket)
    return {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.gas,
        "optimizer": {"type": "AdamW",
                      "params": {"lr": args.lr, "weight_decay": 0.0, "torch_adam": True}},
        "zero_optimization": zero,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


def expert_parallel_size(args, world):
    """--ep, or the largest size that divides both the experts and the world (DeepSpeed needs
    both); an --ep that does not divide the world is refused before DeepSpeed asserts on it."""
    if not args.moe:
        return 1
    if args.ep and world % args.ep:
        sys.exit(f"--ep {args.ep} with {world} ranks: the expert-parallel size must divide the "
                 "number of ranks")
    return args.ep or math.gcd(args.moe, world)


def shape_of(args, world):
    ep = expert_parallel_size(args, world)
    return gpt.Shape(vocab=args.vocab, seq=args.seq, d_model=args.d_model, heads=args.heads,
                     layers=args.layers, ffn=args.ffn, experts=args.moe,
                     ep_size=ep if args.moe else 1)


def build(args):
    """The DeepSpeed engine of the variant `args` names; the same initial weights on every stack."""
    import deepspeed
    cfg = ds_config(args)
    shape = shape_of(args, dist.get_world_size())
    torch.manual_seed(args.seed)
    if args.pipe:
        net = gpt.pipeline(shape, args.pipe)
    elif args.zero == 3:
        with deepspeed.zero.Init(config_dict_or_path=cfg):
            net = gpt.GPT(shape)
    else:
        net = gpt.GPT(shape)
    params = [p for p in net.parameters() if p.requires_grad]
    if args.moe:
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
        params = split_params_into_different_moe_groups_for_optimizer(
            {"params": params, "name": "parameters"})
    engine, _, _, _ = deepspeed.initialize(model=net, model_parameters=params, config=cfg)
    torch.manual_seed(args.seed + 1)  # the MoE gate's random token selection draws from this
    return engine, shape


def train_step(engine, shape, args, step):
    """One optimizer step; returns this rank's loss (for --pipe: the pipeline's, averaged over
    micro-batches and data-parallel ranks)."""
    rank = dist.get_rank()
    if args.pipe:
        dp_rank = engine.grid.get_data_parallel_rank()
        data = iter([gpt.batch(shape, args.micro_batch, step * args.gas + m, dp_rank, args.seed)
                     for m in range(args.gas)])
        return float(engine.train_batch(data_iter=data))
    total = 0.0
    for m in range(args.gas):
        tokens, labels = gpt.batch(shape, args.micro_batch, step * args.gas + m, rank, args.seed)
        loss = engine(tokens, labels)
        engine.backward(loss)
        engine.step()
        total += float(loss.detach())
    return total / args.gas


def local_parameters(engine):
    """This rank's parameters: the partition it owns under ZeRO-3, else the full tensors."""
    out = {}
    for name, p in engine.module.named_parameters():
        t = p.ds_tensor if hasattr(p, "ds_tensor") else p
        out[name] = t.detach().clone().reshape(-1)
    return out


def tokens_per_step(args, world):
    replicas = world // args.pipe if args.pipe else world
    return replicas * args.gas * args.micro_batch * args.seq


def report(args, engine, losses, step_s, comm_share):
    """Rank 0 prints (and with --json writes) the result; each rank dumps with --dump."""
    rank, world = dist.get_rank(), dist.get_world_size()
    # The slowest rank's time per step, and the communication share averaged over ranks.
    t = torch.tensor(step_s, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    share = torch.tensor([comm_share], dtype=torch.float64)
    dist.all_reduce(share)
    share = share.item() / world
    median = statistics.median(t.tolist()) if len(step_s) else float("nan")
    tps = tokens_per_step(args, world) / median
    # Each step's loss averaged over ranks (each trains on micro-batches of its own), as the
    # pipeline's already is and as examples/torch reports it, so every variant's curve means the
    # same; --dump keeps this rank's own.
    if args.pipe:
        mean_losses = list(losses)
    else:
        lt = torch.tensor(losses, dtype=torch.float64)
        dist.all_reduce(lt)
        mean_losses = (lt / world).tolist()
    variant = f"pipe{args.pipe}-" if args.pipe else ""
    if args.moe:
        variant += f"moe{args.moe}ep{expert_parallel_size(args, world)}-"
    variant += f"zero{args.zero}"
    result = {"variant": variant, "dist": args.dist, "ranks": world, "steps": len(losses),
              "timed_steps": len(step_s), "step_ms": [x * 1e3 for x in t.tolist()],
              "median_step_ms": median * 1e3, "tokens_per_step": tokens_per_step(args, world),
              "tokens_per_s": tps, "comm_share": share, "losses": mean_losses,
              "mcr_rules": os.environ.get("MCR_RULES", ""),
              "mcr_tuning": os.environ.get("MCR_TUNING", ""),
              "mcr_hier": os.environ.get("MCR_HIER", "")}
    if rank == 0:
        curve = " ".join(f"{x:.4f}" for x in mean_losses[:: max(1, len(losses) // 5)])
        print(f"deepspeed {variant} dist={args.dist} ranks={world} steps={len(losses)} "
              f"median_step_ms={median * 1e3:.1f} tokens_per_s={tps:.0f} "
              f"comm_share={share:.2f} final_loss={mean_losses[-1]:.6f} curve=[{curve}]", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        torch.save({"losses": losses, "params": local_parameters(engine)},
                   os.path.join(args.dump, f"rank{rank}.pt"))
    return result


class Turns:
    """--turns DIR:first|second: two runs with the same number of ranks on one machine take turns,
    step by step (rank r of one waits for rank r of the other to finish its step), so that both
    see the same load: an A/B comparison on a shared machine. A waiting rank sleeps in read()."""

    def __init__(self, spec, rank):
        folder, role = spec.rsplit(":", 1)
        if role not in ("first", "second"):
            sys.exit(f"--turns {spec}: the role must be 'first' or 'second'")
        os.makedirs(folder, exist_ok=True)
        paths = [os.path.join(folder, f"{who}{rank}") for who in ("first", "second")]
        for path in paths:
            try:
                os.mkfifo(path)
            except FileExistsError:
                pass
        # O_RDWR: opening does not wait for the other side; read() waits for a token.
        mine, theirs = paths if role == "first" else paths[::-1]
        self.mine, self.theirs = os.open(mine, os.O_RDWR), os.open(theirs, os.O_RDWR)
        self.first = role == "first"
        self.rank = rank

    # How long a rank waits for its partner's step: a partner that failed or stopped never writes
    # its token, and an O_RDWR FIFO never reads end-of-file (this rank holds a write end itself).
    PARTNER_TIMEOUT_S = 600

    def before(self, i):
        if i > 0 or not self.first:
            ready, _, _ = select.select([self.mine], [], [], self.PARTNER_TIMEOUT_S)
            if not ready:
                sys.exit(f"--turns: step {i}: the other run's rank {self.rank} did not finish its "
                         f"step within {self.PARTNER_TIMEOUT_S} s (it failed or stopped, or runs "
                         "other --steps/--warmup)")
            os.read(self.mine, 1)

    def after(self, i):
        os.write(self.theirs, b"t")


def train(args, engine, shape, clock):
    turns = Turns(args.turns, dist.get_rank()) if args.turns else None
    losses, step_s, comm = [], [], 0.0
    for i in range(args.steps):
        if turns:
            turns.before(i)
        dist.barrier()
        clock.seconds = 0.0
        t = time.perf_counter()
        loss = train_step(engine, shape, args, i)
        elapsed = time.perf_counter() - t
        if turns:
            turns.after(i)
        if i >= args.warmup:
            step_s.append(elapsed)
            comm += clock.seconds
        losses.append(loss)
    return losses, step_s, comm / max(sum(step_s), 1e-12)


def main():
    args = finish_args(parser().parse_args())
    import deepspeed
    deepspeed.utils.logger.setLevel("WARNING")
    clock = CommClock()
    override = init_dist(args, clock)
    with override:
        engine, shape = build(args)
        losses, step_s, share = train(args, engine, shape, clock)
        report(args, engine, losses, step_s, share)


if __name__ == "__main__":
    main()
