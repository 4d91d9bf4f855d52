// Argument validation and backend arguments for each operation (validation.cpp). Called by the
// Communicator facade before dispatch, so bad input fails on the calling rank before any rank
// blocks (architecture invariant 4).
#pragma once

#include <cstddef>
#include <span>

#include "core/backend.hpp"
#include "core/state.hpp"
#include "mcr/comm/communicator.hpp"

namespace mcr::detail {

/// A validated operation: the backend's arguments and the global byte count selection uses.
/// `args.async` is left false; the facade sets it.
struct Prepared {
  OpArgs args;
  std::size_t bytes = 0;
};

Prepared prepare_p2p(const CommState& s, OpType op, const Tensor& t, int peer,
                     const CallOptions& o);
Prepared prepare_broadcast(const CommState& s, const Tensor& t, int root);
Prepared prepare_reduce(const CommState& s, OpType op, const Tensor& in, const Tensor& out,
                        ReduceOp r, int root);
Prepared prepare_all_gather(const CommState& s, const Tensor& in, const Tensor& out);
Prepared prepare_all_gather_v(const CommState& s, const Tensor& in, const Tensor& out,
                              std::span<const std::size_t> counts);
Prepared prepare_gather(const CommState& s, const Tensor& in, const Tensor& out, int root);
Prepared prepare_scatter(const CommState& s, const Tensor& in, const Tensor& out, int root);
Prepared prepare_reduce_scatter(const CommState& s, const Tensor& in, const Tensor& out,
                                ReduceOp r);
Prepared prepare_all_to_all(const CommState& s, const Tensor& in, const Tensor& out);
Prepared prepare_all_to_all_v(const CommState& s, const Tensor& in, std::span<const std::size_t> sc,
                              const Tensor& out, std::span<const std::size_t> rc,
                              const CallOptions& o);

}  // namespace mcr::detail
