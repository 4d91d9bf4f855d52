"""DLRM-style training step: embedding tables sharded over ranks (model parallel, exchanged with
all_to_all), bottom and top MLPs replicated with DDP (data parallel).

    PYTHONPATH=build/python mpirun -np 2 .venv/bin/python examples/torch/dlrm.py --dist mcr-auto --steps 20

Each rank owns TABLES_PER_RANK tables. Forward: every rank sends the indices of its local batch
for table t to t's owner (all_to_all), owners look them up, and the embeddings go back to the
ranks holding the samples (all_to_all); backward runs the second exchange in reverse.
"""

import torch
import torch.distributed as dist
import torch.nn as nn

from harness import AllToAll, Run, parse

TABLES_PER_RANK, ROWS, DIM, DENSE, BATCH = 2, 20000, 32, 64, 256


class Dense(nn.Module):
    """The replicated part: bottom MLP over dense features, top MLP over [bottom, embeddings]."""

    def __init__(self, tables):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(DENSE, 128), nn.ReLU(), nn.Linear(128, DIM), nn.ReLU())
        self.top = nn.Sequential(nn.Linear(DIM * (tables + 1), 256), nn.ReLU(), nn.Linear(256, 64),
                                 nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x, emb):
        return self.top(torch.cat([self.bottom(x), emb], dim=1))


def main():
    args = parse(__doc__)
    run = Run(args)
    rank, world = run.rank, run.world
    tables = world * TABLES_PER_RANK
    torch.manual_seed(100 + rank)  # this rank's shard of the tables
    local_tables = nn.ModuleList(nn.EmbeddingBag(ROWS, DIM, mode="sum") for _ in range(TABLES_PER_RANK))
    torch.manual_seed(0)  # replicated dense part
    dense = run.ddp(Dense(tables))
    opt = torch.optim.SGD(list(dense.parameters()) + list(local_tables.parameters()), lr=0.05)

    def one_step(i):
        g = torch.Generator().manual_seed(1000 * i + rank)
        x = torch.randn(BATCH, DENSE, generator=g)
        idx = torch.randint(0, ROWS, (BATCH, tables), generator=g)
        y = (x[:, 0] > 0).float().unsqueeze(1)
        # Indices to the owners: slot j of the send buffer holds this batch's indices for rank j's
        # tables; each rank receives [world, BATCH, TABLES_PER_RANK] indices for its own tables.
        send = idx.view(BATCH, world, TABLES_PER_RANK).permute(1, 0, 2).contiguous()
        recv = torch.empty_like(send)
        with run.comm():
            dist.all_to_all_single(recv, send)
        looked = torch.stack([local_tables[k](recv[:, :, k].reshape(-1, 1))
                              for k in range(TABLES_PER_RANK)], dim=1)  # [world*BATCH, T_local, DIM]
        back = AllToAll.apply(looked.view(world, BATCH * TABLES_PER_RANK * DIM), run)
        emb = back.view(world, BATCH, TABLES_PER_RANK, DIM).permute(1, 0, 2, 3).reshape(BATCH, -1)
        loss = nn.functional.binary_cross_entropy_with_logits(dense(x, emb), y)
        opt.zero_grad()
        loss.backward()
        run.average_sharded(local_tables.parameters())
        opt.step()
        return loss.item()

    for i in range(args.steps):
        run.step(i, lambda: one_step(i))
    run.report("dlrm", dense.parameters(), local_tables.parameters())


if __name__ == "__main__":
    main()
