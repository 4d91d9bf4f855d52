// How each collective of `hier` decomposes into steps on the two sub-communicators, and the local
// copies between them. A step list is fixed when the operation starts and depends only on values
// equal on every rank of the sub-communicator that runs the step (op, counts, root, this rank's
// host and local index), so every member of a sub-communicator issues the same sub-operations in
// the same order.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/work.hpp"

namespace mcr::detail {

/// This rank's place in the composition and the two cached sub-communicators.
struct HierLayout {
  int hosts = 1;
  int per_host = 1;
  int host = 0;               ///< this rank's host = its rank in `inter`
  int local = 0;              ///< this rank's local index = its rank in `intra`
  std::vector<int> rank_at;   ///< (host * per_host + local) -> rank in the parent
  Communicator intra;         ///< the members on this rank's host, ordered by local index
  Communicator inter;         ///< the members with this rank's local index, ordered by host
  std::string intra_backend;  ///< fixed by MCR_HIER, or empty: selected per step
  std::string inter_backend;
};

/// One step: a local copy, or a sub-operation. Sub-operations are always issued in the
/// asynchronous form, whatever the form of the composed call: the form must agree across the
/// members of a sub-communicator (MPI matches no blocking collective with a nonblocking one), and
/// whether a rank could block is its own view (docs/design.md, "Composed operations").
///
/// Steps are issued strictly in list order (the list is the same on every rank, so each
/// sub-communicator sees the same sequence), each once the steps it depends on have completed;
/// several may be in flight at once, which lets a pipelined all_reduce overlap its levels.
struct ComposedStep {
  ComposedStep(std::function<void()> l, std::function<Work()> i, std::vector<std::size_t> a = {},
               bool e = false)
      : local(std::move(l)), issue(std::move(i)), after(std::move(a)), explicit_after(e) {}
  std::function<void()> local;
  std::function<Work()> issue;
  /// The steps that must have completed first; when `explicit_after` is false, the previous one.
  std::vector<std::size_t> after;
  bool explicit_after = false;
};

/// A composed operation in progress: its steps, the scratch buffers they share, and where it is.
struct ComposedOp {
  std::vector<ComposedStep> steps;
  // Not zero-filled: a step writes every byte before another reads it (padding included).
  std::vector<std::unique_ptr<std::byte[]>> scratch;
  std::size_t next = 0;        ///< the next step to issue, in list order
  std::vector<Work> works;     ///< per issued sub-operation step, while in flight
  std::vector<char> finished;  ///< per step
  bool done = false;
  std::exception_ptr error;
};

/// The sub-operations of the steps of each op, in order, for `mcr info` and messages.
/// Ops hier does not compose get an empty list.
struct StepOp {
  bool intra;  ///< within the host (else between hosts)
  OpType op;
};
std::vector<StepOp> composed_steps(OpType op);

/// The steps of `args` (an op composed_steps() lists) on `layout`.
std::unique_ptr<ComposedOp> compose(const HierLayout& layout, const OpArgs& args);

}  // namespace mcr::detail
