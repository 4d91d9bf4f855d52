"""FSDP2 (fully_shard) on "mcr" against FSDP2 on torch's gloo (same processes, same data): a small
transformer trained for a few steps, then every parameter gathered (DTensor.full_tensor, a
functional all-gather) and compared. FSDP2 all-gathers in place (the input is this rank's slot of
the output) and reduce-scatters with AVG, or with PREMUL_SUM after set_gradient_divide_factor. At 2 ranks the sums have two addends and round alike in
any order: bit-identical. At more ranks the libraries sum in different orders: allclose (1e-5)."""

import torch
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard

import torch.distributed as dist

from common import check, finish, setup

STEPS = 4
D, HEADS, FF, SEQ, BATCH = 32, 4, 64, 8, 4


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.embed = nn.Linear(D, D)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)
            for _ in range(2))
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h).mean(dim=(1, 2))


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(BATCH, SEQ, D, generator=g), torch.randn(BATCH, generator=g)


def train(mesh, rank, divide_factor=None, force_sum=False):
    model = Tiny()
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for m in [*model.layers, model]:
        if divide_factor is not None:
            m.set_gradient_divide_factor(divide_factor)
        m.set_force_sum_reduction_for_comms(force_sum)
    # SGD: updates linear in the gradient, so summation-order differences stay at rounding level
    # (Adam would turn the rounding noise of near-zero gradients, such as the key bias's, into
    # full-size steps).
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, rank)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    params = {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}
    return losses, params


def main():
    rank, ws = setup()
    gloo = dist.new_group(backend="gloo")
    mcr_mesh = init_device_mesh("cpu", (ws,))
    gloo_mesh = DeviceMesh.from_group(gloo, "cpu")
    check(dist.get_backend(mcr_mesh.get_group()) == "mcr",
          f"the mesh runs on {dist.get_backend(mcr_mesh.get_group())}, not mcr")
    compare(train(mcr_mesh, rank), train(gloo_mesh, rank), ws, "")
    # A divide factor other than the group's size makes FSDP2 reduce-scatter with PREMUL_SUM (each
    # gradient times 1/8, then summed), which torch's gloo refuses: there the same factor runs as
    # a sum divided by 8 afterwards. A power of two scales exactly, so the two agree bit for bit
    # where the sums round alike.
    compare(train(mcr_mesh, rank, divide_factor=8.0),
            train(gloo_mesh, rank, divide_factor=8.0, force_sum=True), ws,
            " with set_gradient_divide_factor(8) (PREMUL_SUM on mcr)")
    finish("test_fsdp2")


def compare(a, b, ws, what):
    (la, pa), (lb, pb) = a, b
    for step, (x, y) in enumerate(zip(la, lb)):
        check(torch.equal(x, y) if ws == 2 else torch.allclose(x, y, rtol=1e-5, atol=1e-6),
              f"step {step}{what}: loss {x.item()} on mcr, {y.item()} on gloo")
    for name in pa:
        x, y = pa[name], pb[name]
        if ws == 2:
            check(torch.equal(x, y), f"{name}{what} differs from gloo's "
                  f"(max |diff| {(x - y).abs().max().item()})")
        else:
            check(torch.allclose(x, y, rtol=1e-5, atol=1e-6),
                  f"{name}{what}: max |diff| {(x - y).abs().max().item()}")
    if dist.get_rank() == 0:
        print(f"FSDP2{what}: {STEPS} steps, {len(pa)} parameters match gloo "
              f"({'bit-identical' if ws == 2 else 'allclose'})", flush=True)


if __name__ == "__main__":
    main()
