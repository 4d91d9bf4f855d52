"""Tables of docs/deepspeed.md ("Results") from the runs commands.sh wrote.

    python3 data/deepspeed/2026-12-01/summarize.py data/deepspeed/2026-12-01/onehost
    python3 data/deepspeed/2026-12-01/summarize.py data/deepspeed/2026-12-01/paired
    python3 data/deepspeed/2026-12-01/summarize.py data/deepspeed/2026-12-03/paired-cluster-2x2-1gbit

For each model and rank count, per policy: tokens/s (each run's figure is from the median of its
8 measured steps, a step's time being the slowest rank's; the table gives the median over rounds,
the range, and the best round), the ratio to torch's gloo taken within each round (median and
range), the ratio of the best rounds (other work on the machine only ever slows a run down, so the
fastest run of each policy is the least disturbed one), the communication share (median over
rounds), and which backend served each operation during the run (rank 0's MCR_LOG=summary: op ->
backend with its share of that op's time over all rounds).
"""

import collections
import glob
import json
import os
import re
import statistics
import sys

NAME = re.compile(r"r(\d+)-([\w-]+?)-np(\d+)-([\w-]+)\.json$")
ROW = re.compile(r"^(\w+)\s+(\d+)\s+(\w+)\s+(\d+)\s+([0-9.]+)\s")
ORDER = ["torch-gloo", "torch-gloo-torchrun", "mcr-mpi", "mcr-mpi-tcp-thread", "mcr-gloo",
         "mcr-auto", "mcr-tuned", "mcr-tuned-tcp-thread", "mcr-tuned-a2a-gloo", "mcr-hier"]


def ordered(policies):
    """The policies in ORDER's order, any other after them."""
    return [p for p in ORDER if p in policies] + sorted(p for p in policies if p not in ORDER)


def backends(txt):
    """{op: {backend: total_ms}} from the MCR_LOG summary in a run's output."""
    out = collections.defaultdict(lambda: collections.defaultdict(float))
    if not os.path.exists(txt):
        return out
    for line in open(txt):
        m = ROW.match(line)
        if m and m.group(1) != "op":
            out[m.group(1)][m.group(3)] += float(m.group(5))
    return out


PAIR = re.compile(r"p(\d+)-([\w-]+?)-np(\d+)-(mcr-[\w-]+)\.json$")


def paired(folder):
    """A/B pairs (commands.sh paired): each mcr policy against torch's gloo in the same interleaved
    period; the ratio of their tokens/s is the pair's."""
    pairs = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in sorted(glob.glob(os.path.join(folder, "p*-*.json"))):
        m = PAIR.search(os.path.basename(path))
        if not m:
            continue
        rnd, model, np_, policy = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
        gloo_path = path[:-5] + "-torch-gloo.json"
        if not os.path.exists(gloo_path):
            continue
        a, b = json.load(open(path)), json.load(open(gloo_path))
        a["backends"] = backends(path[:-5] + ".txt")
        pairs[(model, np_)][policy].append((rnd, a, b))
    for (model, np_), res in sorted(pairs.items()):
        first = next(iter(res.values()))[0][1]
        print(f"\n### {model}, {np_} ranks ({first['variant']}, {first['tokens_per_step']} tokens "
              "per step), pairs taking turns step by step\n")
        print("| policy | mcr / torch gloo per round | tokens/s mcr (torch gloo), per round "
              "| comm share mcr (torch gloo) | backends (share of the op's time) |")
        print("|---|---|---|---|---|")
        for policy in ordered(res):
            runs = sorted(res[policy], key=lambda x: x[0])
            ratios = " / ".join(f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}"
                                for _, a, b in runs)
            tps = " / ".join(f"{a['tokens_per_s']:.0f} ({b['tokens_per_s']:.0f})"
                             for _, a, b in runs)
            share = " / ".join(f"{a['comm_share']:.2f} ({b['comm_share']:.2f})" for _, a, b in runs)
            ops = collections.defaultdict(lambda: collections.defaultdict(float))
            for _, a, _ in runs:
                for op, bs in a["backends"].items():
                    for name, ms in bs.items():
                        ops[op][name] += ms
            served = "; ".join(
                f"{op} " + ", ".join(f"{b} {ms / sum(bs.values()):.0%}" for b, ms in
                                     sorted(bs.items(), key=lambda x: -x[1]))
                for op, bs in ops.items() if op != "barrier") or "-"
            print(f"| {policy} | {ratios} | {tps} | {share} | {served} |")
        same = []
        for policy in ordered(res):
            diff = max(abs(x - y) for _, a, b in res[policy] for x, y in zip(a["losses"], b["losses"]))
            same.append(f"{policy} " + ("yes" if diff == 0 else f"no (largest difference {diff:.2g})"))
        print("\nLosses identical to torch gloo's to the last bit, every round: " + ", ".join(same))


def main():
    folder = sys.argv[1]
    if glob.glob(os.path.join(folder, "p*-*.json")):
        paired(folder)
        return
    runs = collections.defaultdict(dict)  # (model, np) -> {(round, policy): result}
    for path in sorted(glob.glob(os.path.join(folder, "r*-*.json"))):
        m = NAME.search(os.path.basename(path))
        if not m:
            continue
        rnd, model, np_, policy = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
        r = json.load(open(path))
        r["backends"] = backends(path[:-5] + ".txt")
        runs[(model, np_)][(rnd, policy)] = r
    for (model, np_), res in sorted(runs.items()):
        rounds = sorted({k[0] for k in res})
        policies = ordered({k[1] for k in res})
        first = next(iter(res.values()))
        print(f"\n### {model}, {np_} ranks ({first['variant']}, {first['tokens_per_step']} tokens "
              f"per step, rounds {len(rounds)})\n")
        best_gloo = max(res[(r, "torch-gloo")]["tokens_per_s"] for r in rounds
                        if (r, "torch-gloo") in res)
        print("| policy | tokens/s median (range) | best "
              "| vs torch gloo, same round: median (range) | best vs best | comm share "
              "| backends (share of the op's time) |")
        print("|---|---|---|---|---|---|---|")
        for p in policies:
            tps = [res[(r, p)]["tokens_per_s"] for r in rounds if (r, p) in res]
            ratios = [res[(r, p)]["tokens_per_s"] / res[(r, "torch-gloo")]["tokens_per_s"]
                      for r in rounds if (r, p) in res and (r, "torch-gloo") in res]
            share = statistics.median(res[(r, p)]["comm_share"] for r in rounds if (r, p) in res)
            ops = collections.defaultdict(lambda: collections.defaultdict(float))
            for r in rounds:
                if (r, p) in res:
                    for op, b in res[(r, p)]["backends"].items():
                        for name, ms in b.items():
                            ops[op][name] += ms
            served = "; ".join(
                f"{op} " + ", ".join(f"{b} {ms / sum(bs.values()):.0%}" for b, ms in
                                     sorted(bs.items(), key=lambda x: -x[1]))
                for op, bs in ops.items() if op != "barrier") or "-"
            rng = f"{min(tps):.0f}-{max(tps):.0f}"
            rat = (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                   if ratios else "-")
            print(f"| {p} | {statistics.median(tps):.0f} ({rng}) | {max(tps):.0f} | {rat} "
                  f"| {max(tps) / best_gloo:.2f} | {share:.2f} | {served} |")
        losses = {tuple(round(x, 6) for x in v["losses"]) for v in res.values()}
        print(f"\nDistinct loss curves over these runs (6 decimals): {len(losses)}")


if __name__ == "__main__":
    main()
