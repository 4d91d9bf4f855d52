// Communicator: the public facade. Each operation is validated (validation.cpp), then dispatched
// (dispatch.cpp) in its synchronous or asynchronous form.
#include "mcr/comm/communicator.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/state.hpp"
#include "core/validation.hpp"
#include "mcr/errors.hpp"
#include "observe/comm_log_hooks.hpp"

namespace mcr {

using detail::CommState;
using detail::prepare_all_gather;
using detail::prepare_all_gather_v;
using detail::prepare_all_to_all;
using detail::prepare_all_to_all_v;
using detail::prepare_broadcast;
using detail::prepare_gather;
using detail::prepare_p2p;
using detail::prepare_reduce;
using detail::prepare_reduce_scatter;
using detail::prepare_scatter;
using detail::Prepared;

namespace {

// `p` binds to the prepared temporary: its OpArgs are not copied on the way to dispatch.
Work run(CommState& s, Prepared&& p, const CallOptions& o, bool async) {
  p.args.async = async;
  return Work(s.issue(p.args, o, p.bytes));
}

Prepared barrier_args() {
  Prepared p;
  p.args.op = OpType::barrier;
  p.args.op_name = to_string(OpType::barrier);
  p.args.dtype = DType::u8;
  return p;
}

}  // namespace

// ---- queries ----------------------------------------------------------------------------------

detail::CommState& detail::state_of(const Communicator& comm) {
  return comm.state();
}

detail::CommState& Communicator::state() const {
  if (!state_) {
    throw InvalidArgument(
        "this Communicator is invalid (the calling rank is not a member: split() with "
        "kUndefinedColor or "
        "new_group() without this rank)");
  }
  return *state_;
}

int Communicator::rank() const {
  return state().rank;
}
int Communicator::size() const {
  return state().size;
}
int Communicator::hosts() const {
  return state().topology.hosts;
}
int Communicator::ranks_per_host() const {
  return state().topology.ranks_per_host;
}
int Communicator::host_index() const {
  const auto& s = state();
  return s.topology.host_of_member.empty()
             ? 0
             : s.topology.host_of_member[static_cast<std::size_t>(s.rank)];
}
int Communicator::local_rank() const {
  const auto& s = state();
  return s.topology.local_index.empty() ? s.rank
                                        : s.topology.local_index[static_cast<std::size_t>(s.rank)];
}
std::uint64_t Communicator::id() const {
  return state().id;
}
int Communicator::global_rank(int r) const {
  auto& s = state();
  if (r < 0 || r >= s.size) {
    throw InvalidArgument(fmt::format(
        "global_rank: rank {} is out of range for a communicator of size {}", r, s.size));
  }
  return s.world_ranks[static_cast<std::size_t>(r)];
}
std::chrono::milliseconds Communicator::timeout() const {
  return state().timeout;
}
void Communicator::set_timeout(std::chrono::milliseconds t) {
  if (t.count() <= 0) {
    throw InvalidArgument(fmt::format("set_timeout: timeout {} ms must be positive", t.count()));
  }
  state().timeout = std::min(t, detail::kLongestTimeout);
}
std::vector<std::string> Communicator::backends() const {
  std::vector<std::string> out;
  for (auto& b : state().backends)
    out.emplace_back(b->name());
  return out;
}
Selection Communicator::explain(OpType op, DType dtype, std::size_t bytes, ReduceOp reduce,
                                Device device, CallForm form, std::string_view backend) const {
  const auto& selector = *state().selector;
  Selection s = selector.explain(op, dtype, reduce, device.kind, bytes, backend, form);
  if (const detail::Backend* b = selector.find(s.backend); b != nullptr) {
    s.composed = b->explain_steps(op, dtype, bytes, reduce);
  }
  return s;
}
void Communicator::set_observer(std::shared_ptr<OpObserver> observer) {
  if (observer) detail::TickClock::prepare();
  state().observer = detail::beside_env_comm_log(state().observer, std::move(observer));
}

// ---- operations -------------------------------------------------------------------------------

void Communicator::send(const Tensor& t, int dst, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_p2p(s, OpType::send, t, dst, o), o, false);
}

void Communicator::recv(const Tensor& t, int src, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_p2p(s, OpType::recv, t, src, o), o, false);
}

Work Communicator::isend(const Tensor& t, int dst, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_p2p(s, OpType::send, t, dst, o), o, true);
}

Work Communicator::irecv(const Tensor& t, int src, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_p2p(s, OpType::recv, t, src, o), o, true);
}

void Communicator::broadcast(const Tensor& t, int root, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_broadcast(s, t, root), o, false);
}

Work Communicator::ibroadcast(const Tensor& t, int root, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_broadcast(s, t, root), o, true);
}

void Communicator::reduce(const Tensor& in, const Tensor& out, ReduceOp r, int root,
                          const CallOptions& o) {
  auto& s = state();
  run(s, prepare_reduce(s, OpType::reduce, in, out, r, root), o, false);
}

void Communicator::reduce(const Tensor& t, ReduceOp r, int root, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_reduce(s, OpType::reduce, t, t, r, root), o, false);
}

Work Communicator::ireduce(const Tensor& in, const Tensor& out, ReduceOp r, int root,
                           const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_reduce(s, OpType::reduce, in, out, r, root), o, true);
}

Work Communicator::ireduce(const Tensor& t, ReduceOp r, int root, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_reduce(s, OpType::reduce, t, t, r, root), o, true);
}

void Communicator::all_reduce(const Tensor& in, const Tensor& out, ReduceOp r,
                              const CallOptions& o) {
  auto& s = state();
  run(s, prepare_reduce(s, OpType::all_reduce, in, out, r, 0), o, false);
}

void Communicator::all_reduce(const Tensor& t, ReduceOp r, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_reduce(s, OpType::all_reduce, t, t, r, 0), o, false);
}

Work Communicator::iall_reduce(const Tensor& in, const Tensor& out, ReduceOp r,
                               const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_reduce(s, OpType::all_reduce, in, out, r, 0), o, true);
}

Work Communicator::iall_reduce(const Tensor& t, ReduceOp r, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_reduce(s, OpType::all_reduce, t, t, r, 0), o, true);
}

void Communicator::all_gather(const Tensor& in, const Tensor& out, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_all_gather(s, in, out), o, false);
}

Work Communicator::iall_gather(const Tensor& in, const Tensor& out, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_all_gather(s, in, out), o, true);
}

void Communicator::all_gather_v(const Tensor& in, const Tensor& out, std::span<const std::size_t> c,
                                const CallOptions& o) {
  auto& s = state();
  run(s, prepare_all_gather_v(s, in, out, c), o, false);
}

Work Communicator::iall_gather_v(const Tensor& in, const Tensor& out,
                                 std::span<const std::size_t> c, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_all_gather_v(s, in, out, c), o, true);
}

void Communicator::gather(const Tensor& in, const Tensor& out, int root, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_gather(s, in, out, root), o, false);
}

Work Communicator::igather(const Tensor& in, const Tensor& out, int root, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_gather(s, in, out, root), o, true);
}

void Communicator::scatter(const Tensor& in, const Tensor& out, int root, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_scatter(s, in, out, root), o, false);
}

Work Communicator::iscatter(const Tensor& in, const Tensor& out, int root, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_scatter(s, in, out, root), o, true);
}

void Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp r,
                                  const CallOptions& o) {
  auto& s = state();
  run(s, prepare_reduce_scatter(s, in, out, r), o, false);
}

Work Communicator::ireduce_scatter(const Tensor& in, const Tensor& out, ReduceOp r,
                                   const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_reduce_scatter(s, in, out, r), o, true);
}

void Communicator::all_to_all(const Tensor& in, const Tensor& out, const CallOptions& o) {
  auto& s = state();
  run(s, prepare_all_to_all(s, in, out), o, false);
}

Work Communicator::iall_to_all(const Tensor& in, const Tensor& out, const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_all_to_all(s, in, out), o, true);
}

void Communicator::all_to_all_v(const Tensor& in, std::span<const std::size_t> sc,
                                const Tensor& out, std::span<const std::size_t> rc,
                                const CallOptions& o) {
  auto& s = state();
  run(s, prepare_all_to_all_v(s, in, sc, out, rc, o), o, false);
}

Work Communicator::iall_to_all_v(const Tensor& in, std::span<const std::size_t> sc,
                                 const Tensor& out, std::span<const std::size_t> rc,
                                 const CallOptions& o) {
  auto& s = state();
  return run(s, prepare_all_to_all_v(s, in, sc, out, rc, o), o, true);
}

void Communicator::barrier(const CallOptions& o) {
  run(state(), barrier_args(), o, false);
}

Work Communicator::ibarrier(const CallOptions& o) {
  return run(state(), barrier_args(), o, true);
}

}  // namespace mcr
