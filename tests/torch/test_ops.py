"""Every c10d operation x dtype x size (0, odd, large) x contiguity on the "mcr" backend, checked
against values computed from every rank's input here, and (where gloo supports the dtype) against
torch's gloo backend on the same processes. Run under mpirun or torchrun with 2-4 ranks."""

import torch
import torch.distributed as dist

from common import DTYPES, FLOATS, check, data, finish, noncontiguous, same, setup

R = dist.ReduceOp


def reduce_all(inputs, op, dtype):
    acc = inputs[0].to(torch.float64 if dtype in FLOATS else torch.int64)
    for t in inputs[1:]:
        t = t.to(acc.dtype)
        if op == R.SUM or op == R.AVG:
            acc = acc + t
        elif op == R.PRODUCT:
            acc = acc * t
        elif op == R.MAX:
            acc = torch.maximum(acc, t)
        elif op == R.MIN:
            acc = torch.minimum(acc, t)
        elif op == R.BAND:
            acc = acc & t
        elif op == R.BOR:
            acc = acc | t
        elif op == R.BXOR:
            acc = acc ^ t
    if op == R.AVG:
        acc = acc / len(inputs)
    return acc.to(dtype)


def layout(t, contiguous):
    return t if contiguous else noncontiguous(t)


def ops_for(dtype):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype in FLOATS:
        ops.append(R.AVG)
    else:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def run_case(rank, ws, n, dtype, contig, gloo):
    tag = f"n={n} {dtype} {'contig' if contig else 'strided'}"
    mine = data(rank, n, dtype)
    every = [data(r, n, dtype) for r in range(ws)]

    for op in ops_for(dtype):
        small = (lambda r: data(r, n, dtype) % 2 + 1) if op == R.PRODUCT else (lambda r: data(r, n, dtype))
        t = layout(small(rank), contig)
        dist.all_reduce(t, op=op)
        want = reduce_all([small(r) for r in range(ws)], op, dtype)
        if op == R.AVG:
            check(torch.allclose(t.double(), want.double(), rtol=1e-2), f"all_reduce AVG {tag}")
        else:
            same(t.reshape(-1), want, f"all_reduce {op} {tag}")

    t = layout(mine.clone(), contig)
    dist.broadcast(t, src=ws - 1)
    same(t, every[ws - 1], f"broadcast {tag}")

    t = layout(mine.clone(), contig)
    dist.reduce(t, dst=0, op=R.MAX)
    if rank == 0:
        same(t, reduce_all(every, R.MAX, dtype), f"reduce {tag}")

    outs = [layout(torch.zeros(n, dtype=dtype), contig) for _ in range(ws)]
    dist.all_gather(outs, layout(mine, contig))
    for r in range(ws):
        same(outs[r], every[r], f"all_gather slot {r} {tag}")

    flat = layout(torch.zeros(n * ws, dtype=dtype), contig)
    dist.all_gather_into_tensor(flat, layout(mine, contig))
    same(flat, torch.cat(every), f"all_gather_into_tensor {tag}")

    gl = [layout(torch.zeros(n, dtype=dtype), contig) for _ in range(ws)] if rank == 1 % ws else None
    dist.gather(layout(mine, contig), gl, dst=1 % ws)
    if gl is not None:
        for r in range(ws):
            same(gl[r], every[r], f"gather slot {r} {tag}")

    out = layout(torch.zeros(n, dtype=dtype), contig)
    src_list = [data(100 + r, n, dtype) for r in range(ws)]
    dist.scatter(out, [layout(x, contig) for x in src_list] if rank == 0 else None, src=0)
    same(out, src_list[rank], f"scatter {tag}")

    pieces = [[data(r * ws + j, n, dtype) for j in range(ws)] for r in range(ws)]
    out = layout(torch.zeros(n, dtype=dtype), contig)
    dist.reduce_scatter(out, [layout(x, contig) for x in pieces[rank]], op=R.SUM)
    same(out, reduce_all([pieces[r][rank] for r in range(ws)], R.SUM, dtype), f"reduce_scatter {tag}")

    out = layout(torch.zeros(n, dtype=dtype), contig)
    dist.reduce_scatter_tensor(out, layout(torch.cat(pieces[rank]), contig), op=R.SUM)
    same(out, reduce_all([pieces[r][rank] for r in range(ws)], R.SUM, dtype),
         f"reduce_scatter_tensor {tag}")

    # all_to_all_single, equal splits: slot j of rank r's input goes to rank j.
    out = layout(torch.zeros(n * ws, dtype=dtype), contig)
    dist.all_to_all_single(out, layout(torch.cat(pieces[rank]), contig))
    same(out, torch.cat([pieces[r][rank] for r in range(ws)]), f"all_to_all_single {tag}")

    # Uneven splits: rank r sends (r + j) % 3 rows of width 2 to rank j.
    rows = lambda r, j: (r + j + n) % 3  # noqa: E731
    send = [data(10 * rank + j, rows(rank, j) * 2, dtype).reshape(-1, 2) for j in range(ws)]
    recv_rows = [rows(j, rank) for j in range(ws)]
    out = torch.zeros(sum(recv_rows), 2, dtype=dtype)
    dist.all_to_all_single(out, torch.cat(send), recv_rows, [rows(rank, j) for j in range(ws)])
    want = torch.cat([data(10 * j + rank, rows(j, rank) * 2, dtype).reshape(-1, 2) for j in range(ws)])
    same(out, want, f"all_to_all_single uneven {tag}")

    outs = [layout(torch.zeros(rows(j, rank) * 2 + n, dtype=dtype), contig) for j in range(ws)]
    ins = [layout(data(10 * rank + j, rows(rank, j) * 2 + n, dtype), contig) for j in range(ws)]
    dist.all_to_all(outs, ins)
    for j in range(ws):
        same(outs[j], data(10 * j + rank, rows(j, rank) * 2 + n, dtype), f"all_to_all from {j} {tag}")

    ts = [layout(data(rank, n + k, dtype, salt=k), contig) for k in range(3)]
    dist.all_reduce_coalesced(ts, op=R.SUM)
    for k in range(3):
        same(ts[k], reduce_all([data(r, n + k, dtype, salt=k) for r in range(ws)], R.SUM, dtype),
             f"all_reduce_coalesced {k} {tag}")

    # Ring: send to the right, receive from the left; blocking pairs ordered to avoid a cycle.
    right, left = (rank + 1) % ws, (rank - 1) % ws
    got = layout(torch.zeros(n, dtype=dtype), contig)
    reqs = [dist.isend(layout(mine, contig), right, tag=3), dist.irecv(got, left, tag=3)]
    for q in reqs:
        q.wait()
    same(got, every[left], f"isend/irecv {tag}")
    got = layout(torch.zeros(n, dtype=dtype), contig)
    if rank % 2 == 0:
        dist.send(mine, right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(mine, right)
    same(got, every[left], f"send/recv {tag}")

    dist.barrier()

    # torch's gloo backend on the same processes, for the dtypes it supports (its all_gather
    # divides by zero on empty tensors, so n=0 is left to the checks above).
    if n > 0 and dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8):
        a, b = layout(mine.clone(), contig), mine.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        same(a, b, f"all_reduce vs gloo {tag}")
        a = torch.zeros(n * ws, dtype=dtype)
        b = torch.zeros(n * ws, dtype=dtype)
        dist.all_gather_into_tensor(a, mine)
        dist.all_gather(list(b.chunk(ws)), mine, group=gloo)
        same(a, b, f"all_gather vs gloo {tag}")
        a, b = layout(mine.clone(), contig), mine.clone()
        dist.broadcast(a, src=ws - 1)
        dist.broadcast(b, src=ws - 1, group=gloo)
        same(a, b, f"broadcast vs gloo {tag}")
        a, b = layout(mine.clone(), contig), mine.clone()
        dist.reduce(a, dst=0, op=R.MAX)
        dist.reduce(b, dst=0, op=R.MAX, group=gloo)
        if rank == 0:
            same(a, b, f"reduce vs gloo {tag}")
        ga = [torch.zeros(n, dtype=dtype) for _ in range(ws)] if rank == 0 else None
        gb = [torch.zeros(n, dtype=dtype) for _ in range(ws)] if rank == 0 else None
        dist.gather(layout(mine, contig), ga, dst=0)
        dist.gather(mine, gb, dst=0, group=gloo)
        if rank == 0:
            for r in range(ws):
                same(ga[r], gb[r], f"gather vs gloo slot {r} {tag}")
        a, b = torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)
        dist.scatter(a, src_list if rank == 0 else None, src=0)
        dist.scatter(b, src_list if rank == 0 else None, src=0, group=gloo)
        same(a, b, f"scatter vs gloo {tag}")


def premul_factor(r):
    """Rank r's PREMUL_SUM factor: powers of two, so every scaled sum is exact in every float."""
    return 0.5 if r % 2 == 0 else 0.25


def premul_sum(inputs):
    acc = sum(premul_factor(r) * t.to(torch.float64) for r, t in enumerate(inputs))
    return acc.to(inputs[0].dtype)


def run_premul(rank, ws, n, dtype, contig):
    """PREMUL_SUM (torch.distributed._make_nccl_premul_sum, which torch's gloo refuses): each rank's
    input times its own factor, summed; a number or a one-element tensor; inputs that are not
    outputs stay as they were."""
    tag = f"PREMUL_SUM n={n} {dtype} {'contig' if contig else 'strided'}"
    every = [data(r, n, dtype) for r in range(ws)]
    for how, factor in (("number", premul_factor(rank)),
                        ("tensor", torch.tensor([premul_factor(rank)]))):
        op = dist._make_nccl_premul_sum(factor)
        t = layout(every[rank].clone(), contig)
        dist.all_reduce(t, op=op)
        same(t, premul_sum(every), f"all_reduce {tag} ({how})")

        t = layout(every[rank].clone(), contig)
        dist.reduce(t, dst=ws - 1, op=op)
        same(t, premul_sum(every) if rank == ws - 1 else every[rank],
             f"reduce {tag} ({how}) {'root' if rank == ws - 1 else 'non-root keeps its input'}")

        pieces = [[data(r * ws + j, n, dtype) for j in range(ws)] for r in range(ws)]
        want = premul_sum([pieces[r][rank] for r in range(ws)])
        ins = [layout(x.clone(), contig) for x in pieces[rank]]
        out = layout(torch.zeros(n, dtype=dtype), contig)
        dist.reduce_scatter(out, ins, op=op)
        same(out, want, f"reduce_scatter {tag} ({how})")
        for j in range(ws):
            same(ins[j], pieces[rank][j], f"reduce_scatter {tag} ({how}): input {j} kept")

        inp = layout(torch.cat(pieces[rank]), contig)
        out = layout(torch.zeros(n, dtype=dtype), contig)
        dist.reduce_scatter_tensor(out, inp, op=op)
        same(out, want, f"reduce_scatter_tensor {tag} ({how})")
        same(inp, torch.cat(pieces[rank]), f"reduce_scatter_tensor {tag} ({how}): input kept")

        ts = [layout(data(rank, n + k, dtype, salt=k), contig) for k in range(3)]
        dist.all_reduce_coalesced(ts, op=op)
        for k in range(3):
            same(ts[k], premul_sum([data(r, n + k, dtype, salt=k) for r in range(ws)]),
                 f"all_reduce_coalesced {k} {tag} ({how})")

        # A coalesced batch of reduce-scatters, as FSDP2 and functional collectives issue them.
        outs = [torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)]
        with dist._coalescing_manager():
            dist.reduce_scatter_tensor(outs[0], torch.cat(pieces[rank]), op=op)
            dist.reduce_scatter_tensor(outs[1], torch.cat(pieces[rank]) * 2, op=op)
        same(outs[0], want, f"coalesced reduce_scatter_tensor 0 {tag} ({how})")
        same(outs[1], want * 2, f"coalesced reduce_scatter_tensor 1 {tag} ({how})")


def cdata(r, n, dtype):
    """A complex input: real and imaginary parts small integers (exact sums in any float type)."""
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    return torch.complex(data(r, n, real), -data(r, n, real, salt=3))


def run_complex(rank, ws, n, dtype, contig):
    """complex64 and complex128 travel as pairs of floats: data movement, SUM, AVG and PREMUL_SUM,
    through torch's Python API (which views some operations as real itself) and through functional
    collectives (which hand the complex tensor to the backend)."""
    import torch.distributed._functional_collectives as funcol

    tag = f"n={n} {dtype} {'contig' if contig else 'strided'}"
    every = [cdata(r, n, dtype) for r in range(ws)]
    total = sum(every)

    t = layout(every[rank].clone(), contig)
    dist.all_reduce(t)
    same(t, total, f"all_reduce SUM {tag}")
    t = every[rank].clone()
    dist.all_reduce(t, op=R.AVG)
    check(torch.allclose(t, total / ws), f"all_reduce AVG {tag}")
    t = layout(every[rank].clone(), contig)
    dist.broadcast(t, src=ws - 1)
    same(t, every[ws - 1], f"broadcast {tag}")
    t = layout(every[rank].clone(), contig)
    dist.reduce(t, dst=0)
    same(t, total if rank == 0 else every[rank], f"reduce {tag}")
    outs = [torch.zeros(n, dtype=dtype) for _ in range(ws)]
    dist.all_gather(outs, every[rank])
    same(torch.cat(outs), torch.cat(every), f"all_gather {tag}")
    flat = torch.zeros(n * ws, dtype=dtype)
    dist.all_gather_into_tensor(flat, every[rank])
    same(flat, torch.cat(every), f"all_gather_into_tensor {tag}")
    pieces = [[cdata(r * ws + j, n, dtype) for j in range(ws)] for r in range(ws)]
    want = sum(pieces[r][rank] for r in range(ws))
    out = layout(torch.zeros(n, dtype=dtype), contig)
    dist.reduce_scatter(out, pieces[rank])
    same(out, want, f"reduce_scatter {tag}")
    out = torch.zeros(n, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.cat(pieces[rank]))
    same(out, want, f"reduce_scatter_tensor {tag}")
    out = torch.zeros(n, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.cat(pieces[rank]), op=dist._make_nccl_premul_sum(0.5))
    same(out, want * 0.5, f"reduce_scatter_tensor PREMUL_SUM {tag}")
    out = torch.zeros(n * ws, dtype=dtype)
    dist.all_to_all_single(out, torch.cat(pieces[rank]))
    same(out, torch.cat([pieces[r][rank] for r in range(ws)]), f"all_to_all_single {tag}")
    rows = lambda r, j: (r + j + n) % 3  # noqa: E731
    send = [cdata(10 * rank + j, rows(rank, j) * 2, dtype).reshape(-1, 2) for j in range(ws)]
    recv_rows = [rows(j, rank) for j in range(ws)]
    out = torch.zeros(sum(recv_rows), 2, dtype=dtype)
    dist.all_to_all_single(out, torch.cat(send), recv_rows, [rows(rank, j) for j in range(ws)])
    same(out, torch.cat([cdata(10 * j + rank, rows(j, rank) * 2, dtype).reshape(-1, 2)
                         for j in range(ws)]), f"all_to_all_single uneven {tag}")
    outs = [torch.zeros(rows(j, rank) + n, dtype=dtype) for j in range(ws)]
    dist.all_to_all(outs, [cdata(10 * rank + j, rows(rank, j) + n, dtype) for j in range(ws)])
    for j in range(ws):
        same(outs[j], cdata(10 * j + rank, rows(j, rank) + n, dtype), f"all_to_all from {j} {tag}")
    gl = [torch.zeros(n, dtype=dtype) for _ in range(ws)] if rank == 0 else None
    dist.gather(layout(every[rank], contig), gl, dst=0)
    if rank == 0:
        same(torch.cat(gl), torch.cat(every), f"gather {tag}")
    out = torch.zeros(n, dtype=dtype)
    dist.scatter(out, every if rank == 0 else None, src=0)
    same(out, every[rank], f"scatter {tag}")
    right, left = (rank + 1) % ws, (rank - 1) % ws
    got = torch.zeros(n, dtype=dtype)
    reqs = [dist.isend(every[rank], right), dist.irecv(got, left)]
    for q in reqs:
        q.wait()
    same(got, every[left], f"isend/irecv {tag}")

    group = dist.group.WORLD
    same(funcol.all_reduce(every[rank], "sum", group).wait(), total, f"funcol all_reduce {tag}")
    same(funcol.all_gather_tensor(every[rank], 0, group).wait(), torch.cat(every),
         f"funcol all_gather_tensor {tag}")
    same(funcol.reduce_scatter_tensor(torch.cat(pieces[rank]), "sum", 0, group).wait(), want,
         f"funcol reduce_scatter_tensor {tag}")


def complex_refuses_other_ops():
    """MAX, MIN and PRODUCT act on a complex number as a whole: refused before anything is sent."""
    t = cdata(dist.get_rank(), 4, torch.complex64)
    before = t.clone()
    for op in (R.MAX, R.PRODUCT):
        try:
            dist.reduce(t, dst=0, op=op)
        except RuntimeError as e:
            check("complex tensors take SUM, AVG and PREMUL_SUM" in str(e), f"message: {e}")
            same(t, before, f"reduce {op} on complex64: tensor untouched")
            continue
        check(False, f"reduce {op} of a complex64 tensor did not raise")


def all_to_all_splits_rows():
    """all_to_all_single without split sizes sends each rank dim 0 / ws whole rows: a dim 0 the ranks
    do not divide is refused before anything is sent, as torch's own backends refuse it (before, 3
    rows of 2 on 2 ranks sent 3 elements each, a row cut in half)."""
    ws = dist.get_world_size()
    if ws < 2:
        return
    inp, out = torch.ones(ws + 1, 2), torch.zeros(ws + 1, 2)
    try:
        dist.all_to_all_single(out, inp)
    except RuntimeError as e:
        check("dim 0 (" in str(e) and "does not divide equally" in str(e), f"message: {e}")
        same(out, torch.zeros(ws + 1, 2), "all_to_all_single of uneven rows: output untouched")
        return
    check(False, f"all_to_all_single of {ws + 1} rows on {ws} ranks did not raise")


def premul_refuses_integers():
    """Refused on the caller, before anything is sent: every rank raises and goes on."""
    t = torch.ones(4, dtype=torch.int32)
    try:
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    except RuntimeError as e:
        check("PREMUL_SUM multiplies by a floating-point factor" in str(e), f"message: {e}")
        same(t, torch.ones(4, dtype=torch.int32), "PREMUL_SUM on int32: tensor untouched")
        return
    check(False, "PREMUL_SUM on an int32 tensor did not raise")


def barrier_waits_for_earlier_collectives(rank, ws):
    """dist.barrier() returns once the collectives posted before it have completed, as torch's gloo
    barrier waits for them: code after it may read what an async_op all_reduce writes. (mcr's
    runtime completes operations in any order, and a barrier beside 64 MiB finished first.)"""
    big = torch.full((16 << 20,), float(rank + 1))
    w = dist.all_reduce(big, async_op=True)
    dist.barrier()
    check(w.get_future().done(), "barrier returned before an earlier async all_reduce completed")
    same(big[:: 1 << 16], torch.full((256,), float(ws * (ws + 1) // 2)), "all_reduce before barrier")
    w.wait()


def main():
    rank, ws = setup()
    check(dist.get_backend() == "mcr", f"default backend is {dist.get_backend()}")
    gloo = dist.new_group(backend="gloo")
    sizes = [0, 7, 65537]
    count = 0
    for n in sizes:
        for dtype in DTYPES:
            for contig in (True, False):
                if n == 0 and not contig:
                    continue
                run_case(rank, ws, n, dtype, contig, gloo)
                count += 1
    for n in sizes:
        for dtype in FLOATS:
            for contig in (True, False):
                if n == 0 and not contig:
                    continue
                run_premul(rank, ws, n, dtype, contig)
    premul_refuses_integers()
    all_to_all_splits_rows()
    barrier_waits_for_earlier_collectives(rank, ws)
    for n in sizes:
        for dtype in (torch.complex64, torch.complex128):
            for contig in (True, False):
                if n == 0 and not contig:
                    continue
                run_complex(rank, ws, n, dtype, contig)
    complex_refuses_other_ops()
    # bool travels as bytes: data movement and logical reductions.
    b = torch.tensor([rank % 2 == 0, True, False])
    dist.all_reduce(b, op=R.MAX)
    same(b, torch.tensor([True, True, False]) if ws > 1 else b, "all_reduce MAX bool")
    # Each rank's own pattern, so that a slot holding another rank's tensor is seen.
    mine = lambda r: torch.tensor([r % 2 == 0, r == 0, r % 3 == 1])  # noqa: E731
    bl = [torch.zeros(3, dtype=torch.bool) for _ in range(ws)]
    dist.all_gather(bl, mine(rank))
    for r in range(ws):
        same(bl[r], mine(r), f"all_gather bool slot {r}")
    if rank == 0:
        print(f"{count} (size, dtype, layout) cases at {ws} ranks", flush=True)
    finish("test_ops")


if __name__ == "__main__":
    main()
