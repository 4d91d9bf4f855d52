#include "api_driver.hpp"

namespace mcr::test {
namespace {

int gcd(int a, int b) {
  return b == 0 ? a : gcd(b, a % b);
}

}  // namespace

std::vector<Work> issue(Communicator& comm, const PreparedCase& c, const Placement& where,
                        std::chrono::milliseconds timeout) {
  const OpCase& k = c.spec();
  const Operands o = c.operands();
  const auto tensor = [&](const Region& r) {
    return Tensor(c.address(where, r), r.count, k.dtype, where.device);
  };
  const Tensor in = tensor(o.in);
  const Tensor out = tensor(o.out);
  CallOptions opts;
  opts.backend = k.backend;
  opts.timeout = timeout;
  std::vector<Work> works;
  auto run = [&](auto sync_call, auto async_call) {
    if (k.async) {
      works.push_back(async_call());
    } else {
      sync_call();
    }
  };

  switch (k.op) {
    case OpType::send:
    case OpType::recv: {
      const int dst = c.p2p_destination();
      const int src = c.p2p_source();
      opts.tag = k.tag;
      if (k.async) {
        works.push_back(comm.irecv(out, src, opts));
        works.push_back(comm.isend(in, dst, opts));
      } else if (c.rank() < gcd(c.size(), k.root % c.size())) {
        // The exchange decomposes into cycles; the lowest rank of each receives first so that
        // blocking sends cannot wait on each other in a circle.
        comm.recv(out, src, opts);
        comm.send(in, dst, opts);
      } else {
        comm.send(in, dst, opts);
        comm.recv(out, src, opts);
      }
      break;
    }
    case OpType::broadcast:
      run([&] { comm.broadcast(out, k.root, opts); },
          [&] { return comm.ibroadcast(out, k.root, opts); });
      break;
    case OpType::reduce:
      // Non-roots of the out-of-place form pass an empty output with a null pointer (allowed).
      if (o.single_tensor) {
        run([&] { comm.reduce(in, k.reduce, k.root, opts); },
            [&] { return comm.ireduce(in, k.reduce, k.root, opts); });
      } else {
        run([&] { comm.reduce(in, out, k.reduce, k.root, opts); },
            [&] { return comm.ireduce(in, out, k.reduce, k.root, opts); });
      }
      break;
    case OpType::all_reduce:
      if (o.single_tensor) {
        run([&] { comm.all_reduce(in, k.reduce, opts); },
            [&] { return comm.iall_reduce(in, k.reduce, opts); });
      } else {
        run([&] { comm.all_reduce(in, out, k.reduce, opts); },
            [&] { return comm.iall_reduce(in, out, k.reduce, opts); });
      }
      break;
    case OpType::all_gather:
      run([&] { comm.all_gather(in, out, opts); }, [&] { return comm.iall_gather(in, out, opts); });
      break;
    case OpType::all_gather_v:
      run([&] { comm.all_gather_v(in, out, o.counts_a, opts); },
          [&] { return comm.iall_gather_v(in, out, o.counts_a, opts); });
      break;
    case OpType::gather:
      run([&] { comm.gather(in, out, k.root, opts); },
          [&] { return comm.igather(in, out, k.root, opts); });
      break;
    case OpType::scatter:
      run([&] { comm.scatter(in, out, k.root, opts); },
          [&] { return comm.iscatter(in, out, k.root, opts); });
      break;
    case OpType::reduce_scatter:
      run([&] { comm.reduce_scatter(in, out, k.reduce, opts); },
          [&] { return comm.ireduce_scatter(in, out, k.reduce, opts); });
      break;
    case OpType::all_to_all:
      run([&] { comm.all_to_all(in, out, opts); }, [&] { return comm.iall_to_all(in, out, opts); });
      break;
    case OpType::all_to_all_v:
      run([&] { comm.all_to_all_v(in, o.counts_a, out, o.counts_b, opts); },
          [&] { return comm.iall_to_all_v(in, o.counts_a, out, o.counts_b, opts); });
      break;
    case OpType::barrier:
      run([&] { comm.barrier(opts); }, [&] { return comm.ibarrier(opts); });
      break;
  }
  return works;
}

}  // namespace mcr::test
