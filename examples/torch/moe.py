"""MoE transformer block with expert parallelism: one expert per rank, tokens dispatched to their
expert and combined back with all_to_all; attention, norms and the gate replicated with DDP.

    PYTHONPATH=build/python mpirun -np 2 .venv/bin/python examples/torch/moe.py --dist mcr-auto --steps 20

Top-1 routing with a fixed capacity per expert (tokens over capacity are dropped, as in
Switch/DeepSpeed-MoE), so every all_to_all has equal splits.
"""

import torch
import torch.nn as nn

from harness import AllToAll, Run, parse

SEQ, BATCH, D, HEADS, FF, CAPACITY_FACTOR = 64, 8, 128, 4, 512, 1.25


class Dense(nn.Module):
    """Attention sublayer and the gate: replicated on every rank (data parallel)."""

    def __init__(self, experts):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.gate = nn.Linear(D, experts, bias=False)

    def forward(self, x):
        h = x + self.attn(self.norm1(x), self.norm1(x), self.norm1(x), need_weights=False)[0]
        t = self.norm2(h).reshape(-1, D)
        return h, t, self.gate(t).softmax(dim=-1)


def main():
    args = parse(__doc__)
    run = Run(args)
    rank, world = run.rank, run.world
    torch.manual_seed(0)
    dense = run.ddp(Dense(world))
    torch.manual_seed(50 + rank)  # this rank's expert
    expert = nn.Sequential(nn.Linear(D, FF), nn.GELU(), nn.Linear(FF, D))
    opt = torch.optim.Adam(list(dense.parameters()) + list(expert.parameters()), lr=1e-3)
    tokens = SEQ * BATCH
    cap = int(CAPACITY_FACTOR * tokens / world)

    def one_step(i):
        g = torch.Generator().manual_seed(1000 * i + rank)
        x = torch.randn(BATCH, SEQ, D, generator=g)
        target = torch.roll(x, 1, dims=-1)
        h, t, probs = dense(x)
        weight, choice = probs.max(dim=-1)
        # Position of each token within its expert's buffer; tokens beyond capacity are dropped.
        onehot = nn.functional.one_hot(choice, world)
        pos = (onehot.cumsum(0) - 1)[torch.arange(tokens), choice]
        keep = pos < cap
        slot = choice[keep] * cap + pos[keep]
        dispatch = t.new_zeros(world * cap, D).index_copy(0, slot, t[keep])
        mine = AllToAll.apply(dispatch, run)         # [world * cap, D]: tokens for my expert
        done = AllToAll.apply(expert(mine), run)     # back to the ranks that own the tokens
        out = t.new_zeros(tokens, D)
        out = out.index_copy(0, torch.nonzero(keep).squeeze(1), done[slot] * weight[keep].unsqueeze(1))
        y = h + out.view(BATCH, SEQ, D)
        loss = nn.functional.mse_loss(y, target)
        opt.zero_grad()
        loss.backward()
        run.average_sharded(expert.parameters())
        opt.step()
        return loss.item()

    for i in range(args.steps):
        run.step(i, lambda: one_step(i))
    run.report("moe", dense.parameters(), expert.parameters())


if __name__ == "__main__":
    main()
