// Collectives on a gloo context: each OpType mapped onto gloo's algorithm, with the in-place,
// rooted and zero-count cases made explicit, and avg/reduce_scatter built from gloo's pieces.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.hpp"

namespace gloo {
class Context;
}

namespace mcr::detail {

/// One collective, self-contained so that it can run later on the worker thread: the arguments
/// plus owned copies of the count arrays (the caller's arrays may be gone by then).
struct GlooCollective {
  OpArgs args;
  std::vector<std::size_t> send_counts;
  std::vector<std::size_t> recv_counts;
  std::uint32_t tag = 0;  ///< gloo tag: consecutive per context, identical on every rank
  std::chrono::milliseconds timeout{0};
};

GlooCollective make_gloo_collective(const OpArgs& args, int group_size, std::uint32_t tag,
                                    std::chrono::milliseconds timeout);

/// True when the collective moves no data on any rank, judged only from arguments that agree on
/// every rank (so every rank skips it together).
bool moves_nothing(const GlooCollective& c, int group_size);

/// Runs the collective to completion on `ctx` in the calling thread. Throws BackendError or
/// TimeoutError (see gloo_check.hpp).
void run_gloo_collective(const std::shared_ptr<gloo::Context>& ctx, const GlooCollective& c);

}  // namespace mcr::detail
