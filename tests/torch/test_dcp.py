"""torch.distributed.checkpoint (DCP) on "mcr" with FSDP2: a sharded model and its Adam state are
saved after a step, a second model built from another seed (and stepped, so it has optimizer state
of its own) loads the checkpoint, and every parameter and every optimizer state tensor (gathered
whole with DTensor.full_tensor) must equal the saved ones exactly. DCP plans the save and the load
with object collectives (gather_object, scatter_object_list, broadcast_object_list, all_gather
of pickled plans) on the default group, and reads its shards back as DTensors: all over mcr."""

import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from common import check, finish, setup


def build(seed, mesh, rank):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(seed * 100 + rank)
    model(torch.randn(8, 16, generator=g)).pow(2).mean().backward()
    opt.step()
    return model, opt


def whole(state):
    """Every tensor of a (nested) state dict, DTensors gathered whole, keyed by its path."""
    out = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}/{k}", x)
        elif isinstance(v, DTensor):
            out[prefix] = v.full_tensor().clone()
        elif isinstance(v, torch.Tensor):
            out[prefix] = v.clone()

    walk("", state)
    return out


def main():
    rank, ws = setup()
    mesh = init_device_mesh("cpu", (ws,))
    path = tempfile.mkdtemp(prefix="mcr-dcp-") if rank == 0 else ""
    box = [path]
    dist.broadcast_object_list(box, src=0)
    path = box[0]
    try:
        model, opt = build(1, mesh, rank)
        msd, osd = get_state_dict(model, opt)
        saved = whole({"model": msd, "optim": osd})
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)

        other, other_opt = build(2, mesh, rank)
        msd2, osd2 = get_state_dict(other, other_opt)
        before = whole({"model": msd2, "optim": osd2})
        check(any(not torch.equal(before[k], saved[k]) for k in saved),
              "the second model already equals the first: the load would prove nothing")
        state = {"model": msd2, "optim": osd2}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(other, other_opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        msd3, osd3 = get_state_dict(other, other_opt)
        loaded = whole({"model": msd3, "optim": osd3})
        check(sorted(loaded) == sorted(saved),
              f"loaded keys {sorted(loaded)} differ from saved {sorted(saved)}")
        for k, v in saved.items():
            check(torch.equal(loaded[k], v), f"{k}: loaded differs from saved")
        if rank == 0:
            print(f"DCP on mcr: {len(saved)} tensors saved and loaded exactly", flush=True)
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(path, ignore_errors=True)
    finish("test_dcp")


if __name__ == "__main__":
    main()
