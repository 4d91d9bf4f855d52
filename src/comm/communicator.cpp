// Communicator: argument validation (before any rank can block), selection and dispatch.
#include "mcr/communicator.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "mcr/errors.hpp"
#include "runtime.hpp"
#include "state.hpp"
#include "watchdog.hpp"

namespace mcr {

using detail::CommState;
using detail::OpArgs;
using detail::WorkState;

namespace {

const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }

// Checks shared by the operations. Every message names the op, the argument, its value and the rule.
class Check {
 public:
  Check(OpType op, const CommState& s) : op_(to_string(op)), s_(s) {}

  void tensor(const Tensor& t, std::string_view arg) const {
    if (t.data() == nullptr && t.count() > 0) {
      fail("{}: {} has null data with count {}", op_, arg, t.count());
    }
    if (t.device().is_cpu() && t.stream() != nullptr) {
      fail("{}: {} is a CPU tensor but carries a stream", op_, arg);
    }
  }
  void same_type(const Tensor& a, const Tensor& b) const {
    if (a.dtype() != b.dtype()) {
      fail("{}: output dtype {} differs from input dtype {}", op_, to_string(b.dtype()), to_string(a.dtype()));
    }
    if (a.device() != b.device()) {
      fail("{}: output device {} differs from input device {}", op_, to_string(b.device()),
           to_string(a.device()));
    }
  }
  void rank_arg(int r, std::string_view arg) const {
    if (r < 0 || r >= s_.size) {
      fail("{}: {} {} is out of range for a communicator of size {}", op_, arg, r, s_.size);
    }
  }
  void count(const Tensor& t, std::size_t expected, std::string_view arg, std::string_view rule) const {
    if (t.count() != expected) fail("{}: {} has {} elements but {} ({})", op_, arg, t.count(), rule, expected);
  }
  void reduce(ReduceOp r, DType t) const {
    if (!reduce_op_valid_for(r, t)) {
      fail("{}: reduce op {} is not defined for dtype {} ({})", op_, to_string(r), to_string(t),
           is_floating(t) ? "bitwise ops need an integer type" : "avg needs a floating type");
    }
  }
  void counts(std::span<const std::size_t> c, std::string_view arg) const {
    if (c.size() != static_cast<std::size_t>(s_.size)) {
      fail("{}: {} has {} entries but the communicator has {} ranks", op_, arg, c.size(), s_.size);
    }
  }
  // Input and output may share memory only in the in-place layout the op documents.
  void no_partial_overlap(const Tensor& in, const Tensor& out, bool in_place) const {
    if (in_place || in.nbytes() == 0 || out.nbytes() == 0) return;
    const auto* a = bytes_of(in.data());
    const auto* b = bytes_of(out.data());
    if (a < b + out.nbytes() && b < a + in.nbytes()) {
      fail("{}: input [{}, +{} B) overlaps output [{}, +{} B) but is not the in-place layout", op_,
           in.data(), in.nbytes(), out.data(), out.nbytes());
    }
  }

  template <class... A>
  [[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) const {
    throw InvalidArgument(fmt::format(f, std::forward<A>(a)...));
  }

 private:
  std::string_view op_;
  const CommState& s_;
};

bool is_slot(const Tensor& part, const Tensor& whole, std::size_t element_offset) {
  return part.data() != nullptr &&
         bytes_of(part.data()) == bytes_of(whole.data()) + element_offset * whole.element_size();
}

std::size_t sum(std::span<const std::size_t> c) { return std::accumulate(c.begin(), c.end(), std::size_t{0}); }

OpArgs base_args(OpType op, const Tensor& t) {
  OpArgs a;
  a.op = op;
  a.op_name = to_string(op);
  a.dtype = t.dtype();
  a.device = t.device();
  a.stream = t.stream();
  return a;
}

}  // namespace

// ---- CommState --------------------------------------------------------------------------------

namespace detail {

CommState::~CommState() {
  // Drain async work the user dropped, so no backend is destroyed under an operation in flight.
  for (auto& w : outstanding) {
    try {
      if (!w->done && !w->failed) w->wait_for(timeout);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; timeouts are final
    }
  }
  outstanding.clear();
  for (auto& b : backends) engine().unregister_backend(b.get());
}

void CommState::check_usable() const {
  if (!aborted.empty()) throw Error(aborted);
}

void CommState::notify(const WorkState& w) const noexcept {
  if (!observer) return;
  OpRecord r;
  r.sequence = w.sequence;
  r.op = w.op;
  r.async = w.async;
  r.backend = w.backend->name();
  r.dtype = w.dtype;
  r.count = w.count;
  r.bytes = w.bytes;
  r.group_id = id;
  r.group_rank = rank;
  r.group_size = size;
  r.global_rank = world_ranks[static_cast<std::size_t>(rank)];
  const auto span = TickClock::to_steady(w.start_tick, TickClock::now());
  r.start = span.start;
  r.end = span.end;
  observer->on_complete(r);
}

std::shared_ptr<WorkState> CommState::issue(OpArgs& args, const CallOptions& opts, std::size_t bytes) {
  check_usable();
  const ReduceOp reduce = is_reduction(args.op) ? args.reduce : ReduceOp::sum;
  detail::Backend& b =
      opts.backend.empty()
          ? selector->pick(args.op, args.dtype, reduce, args.device.kind, bytes)
          : selector->pick_override(opts.backend, args.op, args.dtype, reduce, args.device.kind, bytes);
  const auto limit = opts.timeout.count() > 0 ? opts.timeout : timeout;
  args.sequence = next_sequence++;
  args.timeout = limit;
  args.may_block = !args.async && !engine().host_progress_pending();
  if (b.blocks_device() && args.device.is_cuda()) engine().fence_device(b, args.device, limit);

  const std::uint64_t start = observer ? TickClock::now() : 0;
  auto& dog = Watchdog::instance();
  dog.arm(args.op_name, args.sequence, b.name(), limit);
  std::unique_ptr<PendingOp> pending;
  try {
    pending = b.start(args);
  } catch (const TimeoutError& e) {
    dog.disarm();
    aborted = fmt::format("communicator aborted: {}", e.what());
    throw;
  } catch (...) {
    dog.disarm();
    throw;
  }
  dog.disarm();

  auto fill = [&](WorkState& w) {
    w.op = args.op;
    w.sequence = args.sequence;
    w.backend = &b;
    w.timeout = limit;
    w.start_tick = start;
    w.owner = this;
    w.device = args.device;
    w.dtype = args.dtype;
    w.count = args.count;
    w.bytes = bytes;
    w.async = args.async;
  };
  if (!args.async) {
    // Synchronous: no allocation; the state lives on this stack frame.
    if (!pending && !observer) return nullptr;  // the fast path: completed inside start()
    WorkState w;
    fill(w);
    if (!pending) {
      w.done = true;
      notify(w);
      return nullptr;
    }
    w.pending = std::move(pending);
    engine().op_started(w);
    w.wait_for(limit);
    return nullptr;
  }
  auto w = std::make_shared<WorkState>();
  fill(*w);
  if (!pending) {
    w->done = true;
    notify(*w);
    return w;
  }
  w->pending = std::move(pending);
  w->keep_alive = shared_from_this();
  engine().op_started(*w);
  if (b.blocks_device()) engine().track_device_op(w);
  std::erase_if(outstanding, [](const auto& o) { return o->done || o->failed; });
  outstanding.push_back(w);
  return w;
}

}  // namespace detail

// ---- queries ----------------------------------------------------------------------------------

detail::CommState& Communicator::state() const {
  if (!state_) {
    throw InvalidArgument(
        "this Communicator is invalid (the calling rank is not a member: split() with kUndefinedColor or "
        "new_group() without this rank)");
  }
  return *state_;
}

int Communicator::rank() const { return state().rank; }
int Communicator::size() const { return state().size; }
std::uint64_t Communicator::id() const { return state().id; }
int Communicator::global_rank(int r) const {
  auto& s = state();
  if (r < 0 || r >= s.size) {
    throw InvalidArgument(fmt::format("global_rank: rank {} is out of range for a communicator of size {}", r,
                                      s.size));
  }
  return s.world_ranks[static_cast<std::size_t>(r)];
}
std::chrono::milliseconds Communicator::timeout() const { return state().timeout; }
void Communicator::set_timeout(std::chrono::milliseconds t) {
  if (t.count() <= 0) {
    throw InvalidArgument(fmt::format("set_timeout: timeout {} ms must be positive", t.count()));
  }
  state().timeout = t;
}
std::vector<std::string> Communicator::backends() const {
  std::vector<std::string> out;
  for (auto& b : state().backends) out.emplace_back(b->name());
  return out;
}
Selection Communicator::explain(OpType op, DType dtype, std::size_t bytes, ReduceOp reduce,
                                Device device) const {
  return state().selector->explain(op, dtype, reduce, device.kind, bytes);
}
void Communicator::set_observer(std::shared_ptr<OpObserver> observer) {
  if (observer) detail::TickClock::prepare();
  state().observer = std::move(observer);
}

// ---- point to point ---------------------------------------------------------------------------

namespace {
Work p2p(CommState& s, OpType op, const Tensor& t, int peer, const CallOptions& o, bool async) {
  Check c(op, s);
  c.tensor(t, op == OpType::send ? "tensor" : "tensor (receive buffer)");
  c.rank_arg(peer, op == OpType::send ? "dst" : "src");
  if (o.tag < 0) c.fail("{}: tag {} must be >= 0", to_string(op), o.tag);
  OpArgs a = base_args(op, t);
  a.in = t.data();
  a.out = t.data();
  a.count = t.count();
  a.root = peer;
  a.tag = o.tag;
  a.async = async;
  return Work(s.issue(a, o, t.nbytes()));
}
}  // namespace

void Communicator::send(const Tensor& t, int dst, const CallOptions& o) { p2p(state(), OpType::send, t, dst, o, false); }
void Communicator::recv(const Tensor& t, int src, const CallOptions& o) { p2p(state(), OpType::recv, t, src, o, false); }
Work Communicator::isend(const Tensor& t, int dst, const CallOptions& o) { return p2p(state(), OpType::send, t, dst, o, true); }
Work Communicator::irecv(const Tensor& t, int src, const CallOptions& o) { return p2p(state(), OpType::recv, t, src, o, true); }

// ---- collectives ------------------------------------------------------------------------------

namespace {

Work do_broadcast(CommState& s, const Tensor& t, int root, const CallOptions& o, bool async) {
  Check c(OpType::broadcast, s);
  c.tensor(t, "tensor");
  c.rank_arg(root, "root");
  OpArgs a = base_args(OpType::broadcast, t);
  a.in = t.data();
  a.out = t.data();
  a.count = t.count();
  a.root = root;
  a.in_place = true;
  a.async = async;
  return Work(s.issue(a, o, t.nbytes()));
}

Work do_reduce(CommState& s, OpType op, const Tensor& in, const Tensor& out, ReduceOp r, int root,
               const CallOptions& o, bool async) {
  Check c(op, s);
  c.tensor(in, "input");
  const bool rooted = op == OpType::reduce;
  if (rooted) c.rank_arg(root, "root");
  const bool writes_output = !rooted || s.rank == root;
  if (writes_output) {
    c.tensor(out, "output");
    c.same_type(in, out);
    c.count(out, in.count(), "output", "it must match the input's count");
  }
  c.reduce(r, in.dtype());
  OpArgs a = base_args(op, in);
  a.reduce = r;
  a.in = in.data();
  a.out = writes_output ? out.data() : nullptr;
  a.count = in.count();
  a.in_place = writes_output && in.data() == out.data();
  if (writes_output) c.no_partial_overlap(in, out, a.in_place);
  a.root = root;
  a.async = async;
  return Work(s.issue(a, o, in.nbytes()));
}

}  // namespace

void Communicator::broadcast(const Tensor& t, int root, const CallOptions& o) { do_broadcast(state(), t, root, o, false); }
Work Communicator::ibroadcast(const Tensor& t, int root, const CallOptions& o) { return do_broadcast(state(), t, root, o, true); }

void Communicator::reduce(const Tensor& in, const Tensor& out, ReduceOp r, int root, const CallOptions& o) {
  do_reduce(state(), OpType::reduce, in, out, r, root, o, false);
}
void Communicator::reduce(const Tensor& t, ReduceOp r, int root, const CallOptions& o) {
  do_reduce(state(), OpType::reduce, t, t, r, root, o, false);
}
Work Communicator::ireduce(const Tensor& in, const Tensor& out, ReduceOp r, int root, const CallOptions& o) {
  return do_reduce(state(), OpType::reduce, in, out, r, root, o, true);
}
Work Communicator::ireduce(const Tensor& t, ReduceOp r, int root, const CallOptions& o) {
  return do_reduce(state(), OpType::reduce, t, t, r, root, o, true);
}
void Communicator::all_reduce(const Tensor& in, const Tensor& out, ReduceOp r, const CallOptions& o) {
  do_reduce(state(), OpType::all_reduce, in, out, r, 0, o, false);
}
void Communicator::all_reduce(const Tensor& t, ReduceOp r, const CallOptions& o) {
  do_reduce(state(), OpType::all_reduce, t, t, r, 0, o, false);
}
Work Communicator::iall_reduce(const Tensor& in, const Tensor& out, ReduceOp r, const CallOptions& o) {
  return do_reduce(state(), OpType::all_reduce, in, out, r, 0, o, true);
}
Work Communicator::iall_reduce(const Tensor& t, ReduceOp r, const CallOptions& o) {
  return do_reduce(state(), OpType::all_reduce, t, t, r, 0, o, true);
}

namespace {

Work do_all_gather(CommState& s, const Tensor& in, const Tensor& out, const CallOptions& o, bool async) {
  Check c(OpType::all_gather, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.count(out, in.count() * static_cast<std::size_t>(s.size), "output",
          "it must hold size() * input count");
  OpArgs a = base_args(OpType::all_gather, in);
  a.in = in.data();
  a.out = out.data();
  a.count = in.count();
  a.in_place = is_slot(in, out, static_cast<std::size_t>(s.rank) * in.count());
  c.no_partial_overlap(in, out, a.in_place);
  a.async = async;
  return Work(s.issue(a, o, out.nbytes()));
}

Work do_all_gather_v(CommState& s, const Tensor& in, const Tensor& out, std::span<const std::size_t> counts,
                     const CallOptions& o, bool async) {
  Check c(OpType::all_gather_v, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.counts(counts, "counts");
  c.count(in, counts[static_cast<std::size_t>(s.rank)], "input", "counts[rank()] says");
  c.count(out, sum(counts), "output", "the sum of counts is");
  const std::size_t displ = sum(counts.first(static_cast<std::size_t>(s.rank)));
  OpArgs a = base_args(OpType::all_gather_v, in);
  a.in = in.data();
  a.out = out.data();
  a.count = in.count();
  a.send_counts = counts.data();
  a.in_place = is_slot(in, out, displ);
  c.no_partial_overlap(in, out, a.in_place);
  a.async = async;
  return Work(s.issue(a, o, out.nbytes()));
}

Work do_gather(CommState& s, const Tensor& in, const Tensor& out, int root, const CallOptions& o, bool async) {
  Check c(OpType::gather, s);
  c.rank_arg(root, "root");
  c.tensor(in, "input");
  OpArgs a = base_args(OpType::gather, in);
  a.in = in.data();
  a.count = in.count();
  a.root = root;
  if (s.rank == root) {
    c.tensor(out, "output");
    c.same_type(in, out);
    c.count(out, in.count() * static_cast<std::size_t>(s.size), "output", "on the root it must hold size() * input count");
    a.out = out.data();
    a.in_place = in.count() > 0 && is_slot(in, out, static_cast<std::size_t>(root) * in.count());
    c.no_partial_overlap(in, out, a.in_place);
  }
  a.async = async;
  return Work(s.issue(a, o, in.nbytes() * static_cast<std::size_t>(s.size)));
}

Work do_scatter(CommState& s, const Tensor& in, const Tensor& out, int root, const CallOptions& o, bool async) {
  Check c(OpType::scatter, s);
  c.rank_arg(root, "root");
  c.tensor(out, "output");
  OpArgs a = base_args(OpType::scatter, out);
  a.out = out.data();
  a.count = out.count();
  a.root = root;
  if (s.rank == root) {
    c.tensor(in, "input");
    c.same_type(in, out);
    c.count(in, out.count() * static_cast<std::size_t>(s.size), "input", "on the root it must hold size() * output count");
    a.in = in.data();
    a.in_place = out.count() > 0 && is_slot(out, in, static_cast<std::size_t>(root) * out.count());
    c.no_partial_overlap(in, out, a.in_place);
  }
  a.async = async;
  return Work(s.issue(a, o, out.nbytes() * static_cast<std::size_t>(s.size)));
}

Work do_reduce_scatter(CommState& s, const Tensor& in, const Tensor& out, ReduceOp r, const CallOptions& o,
                       bool async) {
  Check c(OpType::reduce_scatter, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.reduce(r, in.dtype());
  c.count(in, out.count() * static_cast<std::size_t>(s.size), "input", "it must hold size() * output count");
  OpArgs a = base_args(OpType::reduce_scatter, in);
  a.reduce = r;
  a.in = in.data();
  a.out = out.data();
  a.count = out.count();
  a.in_place = out.count() > 0 && is_slot(out, in, static_cast<std::size_t>(s.rank) * out.count());
  c.no_partial_overlap(in, out, a.in_place);
  a.async = async;
  return Work(s.issue(a, o, in.nbytes()));
}

Work do_all_to_all(CommState& s, const Tensor& in, const Tensor& out, const CallOptions& o, bool async) {
  Check c(OpType::all_to_all, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.count(out, in.count(), "output", "it must match the input's count");
  if (in.count() % static_cast<std::size_t>(s.size) != 0) {
    c.fail("all_to_all: input count {} is not divisible by the communicator size {}", in.count(), s.size);
  }
  OpArgs a = base_args(OpType::all_to_all, in);
  a.in = in.data();
  a.out = out.data();
  a.count = in.count() / static_cast<std::size_t>(s.size);
  a.in_place = in.data() != nullptr && in.data() == out.data();
  c.no_partial_overlap(in, out, a.in_place);
  a.async = async;
  return Work(s.issue(a, o, in.nbytes()));
}

Work do_all_to_all_v(CommState& s, const Tensor& in, std::span<const std::size_t> sc, const Tensor& out,
                     std::span<const std::size_t> rc, const CallOptions& o, bool async) {
  Check c(OpType::all_to_all_v, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.counts(sc, "send_counts");
  c.counts(rc, "recv_counts");
  c.count(in, sum(sc), "input", "the sum of send_counts is");
  c.count(out, sum(rc), "output", "the sum of recv_counts is");
  OpArgs a = base_args(OpType::all_to_all_v, in);
  a.in = in.data();
  a.out = out.data();
  a.send_counts = sc.data();
  a.recv_counts = rc.data();
  a.in_place = in.data() != nullptr && in.data() == out.data();
  if (a.in_place && !std::equal(sc.begin(), sc.end(), rc.begin())) {
    c.fail("all_to_all_v: in place (input and output are the same buffer) needs send_counts == recv_counts");
  }
  c.no_partial_overlap(in, out, a.in_place);
  a.async = async;
  return Work(s.issue(a, o, o.size_hint));
}

Work do_barrier(CommState& s, const CallOptions& o, bool async) {
  OpArgs a;
  a.op = OpType::barrier;
  a.op_name = to_string(OpType::barrier);
  a.dtype = DType::u8;
  a.async = async;
  return Work(s.issue(a, o, 0));
}

}  // namespace

void Communicator::all_gather(const Tensor& in, const Tensor& out, const CallOptions& o) { do_all_gather(state(), in, out, o, false); }
Work Communicator::iall_gather(const Tensor& in, const Tensor& out, const CallOptions& o) { return do_all_gather(state(), in, out, o, true); }
void Communicator::all_gather_v(const Tensor& in, const Tensor& out, std::span<const std::size_t> c, const CallOptions& o) {
  do_all_gather_v(state(), in, out, c, o, false);
}
Work Communicator::iall_gather_v(const Tensor& in, const Tensor& out, std::span<const std::size_t> c, const CallOptions& o) {
  return do_all_gather_v(state(), in, out, c, o, true);
}
void Communicator::gather(const Tensor& in, const Tensor& out, int root, const CallOptions& o) { do_gather(state(), in, out, root, o, false); }
Work Communicator::igather(const Tensor& in, const Tensor& out, int root, const CallOptions& o) { return do_gather(state(), in, out, root, o, true); }
void Communicator::scatter(const Tensor& in, const Tensor& out, int root, const CallOptions& o) { do_scatter(state(), in, out, root, o, false); }
Work Communicator::iscatter(const Tensor& in, const Tensor& out, int root, const CallOptions& o) { return do_scatter(state(), in, out, root, o, true); }
void Communicator::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp r, const CallOptions& o) {
  do_reduce_scatter(state(), in, out, r, o, false);
}
Work Communicator::ireduce_scatter(const Tensor& in, const Tensor& out, ReduceOp r, const CallOptions& o) {
  return do_reduce_scatter(state(), in, out, r, o, true);
}
void Communicator::all_to_all(const Tensor& in, const Tensor& out, const CallOptions& o) { do_all_to_all(state(), in, out, o, false); }
Work Communicator::iall_to_all(const Tensor& in, const Tensor& out, const CallOptions& o) { return do_all_to_all(state(), in, out, o, true); }
void Communicator::all_to_all_v(const Tensor& in, std::span<const std::size_t> sc, const Tensor& out,
                                std::span<const std::size_t> rc, const CallOptions& o) {
  do_all_to_all_v(state(), in, sc, out, rc, o, false);
}
Work Communicator::iall_to_all_v(const Tensor& in, std::span<const std::size_t> sc, const Tensor& out,
                                 std::span<const std::size_t> rc, const CallOptions& o) {
  return do_all_to_all_v(state(), in, sc, out, rc, o, true);
}
void Communicator::barrier(const CallOptions& o) { do_barrier(state(), o, false); }
Work Communicator::ibarrier(const CallOptions& o) { return do_barrier(state(), o, true); }

}  // namespace mcr
