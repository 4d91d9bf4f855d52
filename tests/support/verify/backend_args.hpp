// Drives a backend directly with a prepared case: the OpArgs the communicator would pass for it.
// Used by the tests that run one backend without the communicator (Gloo with ranks as threads,
// NCCL on one device). Includes the internal header src/comm/core/backend.hpp, so only targets that
// see src/comm include it; the rest of the verification library uses the public API only.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/backend.hpp"
#include "prepared_case.hpp"

namespace mcr::test {

/// The arguments of `c` on this rank with its buffers at `where`, as the communicator derives them
/// (backend.hpp documents `count` per op). A send/recv exchange gives two: the receive, then the
/// send. `sequence` numbers the operation; the caller sets async/may_block/timeout.
inline std::vector<detail::OpArgs> backend_args(const PreparedCase& c, const Placement& where,
                                                std::uint64_t sequence) {
  const OpCase& k = c.spec();
  const Operands o = c.operands();
  detail::OpArgs a;
  a.op = k.op;
  a.op_name = to_string(k.op);
  a.dtype = k.op == OpType::barrier ? DType::u8 : k.dtype;
  a.reduce = k.reduce;
  a.device = where.device;
  a.in = c.address(where, o.in);
  a.out = c.address(where, o.out);
  a.count = k.count;
  a.in_place = o.in_place;
  a.root = k.root;
  a.sequence = sequence;
  switch (k.op) {
    case OpType::send:
    case OpType::recv: {
      detail::OpArgs recv = a;
      recv.op = OpType::recv;
      recv.op_name = to_string(OpType::recv);
      recv.in = nullptr;
      recv.root = c.p2p_source();
      recv.tag = k.tag;
      detail::OpArgs send = recv;
      send.op = OpType::send;
      send.op_name = to_string(OpType::send);
      send.in = a.in;
      send.out = nullptr;
      send.root = c.p2p_destination();
      return {recv, send};
    }
    case OpType::reduce:
      if (c.rank() != k.root) a.out = nullptr;  // only the root writes an output
      break;
    case OpType::all_gather_v:
      a.count = o.in.count;
      a.send_counts = o.counts_a.data();
      break;
    case OpType::all_to_all_v:
      a.send_counts = o.counts_a.data();
      a.recv_counts = o.counts_b.data();
      break;
    case OpType::barrier:
      a.count = 0;
      break;
    default:
      break;
  }
  return {a};
}

}  // namespace mcr::test
