"""examples/deepspeed/train.py's arguments: DeepSpeed's own launcher appends --local_rank=N, which
is accepted; --moe with --pipe is refused before anything starts (the pipeline would drop the MoE
auxiliary loss), and so are --ep without --moe (it trained the dense model) and an --ep that does
not divide the experts."""

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
print("train.py arguments: OK")
