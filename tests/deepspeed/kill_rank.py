"""ZeRO-3 training through mcr in which one rank dies with SIGKILL in the middle of a step (in the
forward pass, while the others gather the next layer's parameters); every other rank must raise.

    kill_rank.py --victim RANK --at-step N --stamp FILE [train.py options]

The victim writes the time of its death to FILE, then kills itself. A survivor prints

    kill_rank: rank R raised TYPE after S.SS s at step N: MESSAGE

(S: seconds from the victim's death to the exception reaching the training loop) and exits with
status 3; a survivor that finishes its steps prints "kill_rank: rank R no error" and exits with 4.
The driver (fault.py) checks the lines, the bound and that every process ended.
"""

import argparse
import os
import signal
import sys
import time

import torch.distributed as dist

import train


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--victim", type=int, required=True)
    p.add_argument("--at-step", type=int, default=3)
    p.add_argument("--stamp", required=True)
    opts, rest = p.parse_known_args()
    args = train.finish_args(train.parser().parse_args(
        ["--zero", "3", "--skip-shm-op", "--bucket", "1e5", "--warmup", "0"] + rest))
    import deepspeed
    deepspeed.utils.logger.setLevel("WARNING")
    clock = train.CommClock()
    override = train.init_dist(args, clock)
    rank = dist.get_rank()
    step = {"now": -1}

    def die(module, inputs):
        if rank == opts.victim and step["now"] == opts.at_step:
            with open(opts.stamp + ".tmp", "w") as f:
                f.write(repr(time.time()))
            os.replace(opts.stamp + ".tmp", opts.stamp)
            print(f"kill_rank: rank {rank} kills itself in step {opts.at_step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    with override:
        engine, shape = train.build(args)
        engine.module.blocks[-1].register_forward_pre_hook(die)
        try:
            for i in range(args.steps):
                step["now"] = i
                train.train_step(engine, shape, args, i)
        except Exception as e:  # noqa: BLE001 - any error is what a survivor must get
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            if not os.path.exists(opts.stamp):
                print(f"kill_rank: rank {rank} raised {type(e).__name__} before the victim died, "
                      f"at step {step['now']}: {first}", flush=True)
                sys.exit(5)
            after = time.time() - float(open(opts.stamp).read())
            print(f"kill_rank: rank {rank} raised {type(e).__name__} after {after:.2f} s at step "
                  f"{step['now']}: {first}", flush=True)
            sys.exit(3)
    print(f"kill_rank: rank {rank} no error", flush=True)
    sys.exit(4)


if __name__ == "__main__":
    main()
