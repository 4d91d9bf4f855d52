// Argument validation: every check that can be made locally, before any rank can block, and the
// backend arguments (OpArgs) and selection size of each operation. Every message names the op, the
// argument, its value and the rule (docs/errors.md).
#include "core/validation.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

const std::byte* bytes_of(const void* p) {
  return static_cast<const std::byte*>(p);
}

// Checks shared by the operations. Every message names the op, the argument, its value and the
// rule. Each check is a comparison or two on the passing path (every call takes it); the op's name
// is looked up only to word a failure.
class Check {
 public:
  Check(OpType op, const CommState& s) : op_(op), s_(s) {}

  void tensor(const Tensor& t, std::string_view arg) const {
    if (t.data() == nullptr && t.count() > 0) {
      fail("{}: {} has null data with count {}", name(), arg, t.count());
    }
    if (t.device().is_cpu() && t.stream() != nullptr) {
      fail("{}: {} is a CPU tensor but carries a stream", name(), arg);
    }
  }
  void same_type(const Tensor& a, const Tensor& b) const {
    if (a.dtype() != b.dtype()) {
      fail("{}: output dtype {} differs from input dtype {}", name(), to_string(b.dtype()),
           to_string(a.dtype()));
    }
    if (a.device() != b.device()) {
      fail("{}: output device {} differs from input device {}", name(), to_string(b.device()),
           to_string(a.device()));
    }
  }
  void rank_arg(int r, std::string_view arg) const {
    if (r < 0 || r >= s_.size) {
      fail("{}: {} {} is out of range for a communicator of size {}", name(), arg, r, s_.size);
    }
  }
  void count(const Tensor& t, std::size_t expected, std::string_view arg,
             std::string_view rule) const {
    if (t.count() != expected)
      fail("{}: {} has {} elements but {} ({})", name(), arg, t.count(), rule, expected);
  }
  void reduce(ReduceOp r, DType t) const {
    if (!reduce_op_valid_for(r, t)) {
      fail("{}: reduce op {} is not defined for dtype {} ({})", name(), to_string(r), to_string(t),
           is_floating(t) ? "bitwise ops need an integer type" : "avg needs a floating type");
    }
  }
  void counts(std::span<const std::size_t> c, std::string_view arg) const {
    if (c.size() != static_cast<std::size_t>(s_.size)) {
      fail("{}: {} has {} entries but the communicator has {} ranks", name(), arg, c.size(),
           s_.size);
    }
  }
  // count x the communicator's size, refused where it wraps (it would be compared with the other
  // buffer's count).
  std::size_t times_ranks(const Tensor& t, std::string_view arg) const {
    std::size_t total = 0;
    if (__builtin_mul_overflow(t.count(), static_cast<std::size_t>(s_.size), &total)) {
      fail("{}: {} has {} elements: {} ranks' worth overflows a size_t", name(), arg, t.count(),
           s_.size);
    }
    return total;
  }
  // The sum of counts, refused where it wraps: a wrapped sum (an unsigned underflow in the caller,
  // {1, SIZE_MAX}) could equal a small buffer's count and pass, and the backend would then read or
  // write past it.
  std::size_t sum(std::span<const std::size_t> c, std::string_view arg) const {
    std::size_t total = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (__builtin_add_overflow(total, c[i], &total)) {
        fail("{}: the sum of {} overflows a size_t at {}[{}] = {}", name(), arg, arg, i, c[i]);
      }
    }
    return total;
  }
  // Input and output may share memory only in the in-place layout the op documents. Called once
  // same_type() has passed: both have one element size.
  void no_partial_overlap(const Tensor& in, const Tensor& out, bool in_place) const {
    if (in_place) return;
    const std::size_t es = in.element_size();
    const std::size_t in_bytes = in.count() * es;
    const std::size_t out_bytes = out.count() * es;
    if (in_bytes == 0 || out_bytes == 0) return;
    const auto* a = bytes_of(in.data());
    const auto* b = bytes_of(out.data());
    if (a < b + out_bytes && b < a + in_bytes) {
      fail("{}: input [{}, +{} B) overlaps output [{}, +{} B) but is not the in-place layout",
           name(), in.data(), in_bytes, out.data(), out_bytes);
    }
  }

  template <class... A>
  [[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) const {
    throw InvalidArgument(fmt::format(f, std::forward<A>(a)...));
  }

 private:
  std::string_view name() const noexcept { return to_string(op_); }

  OpType op_;
  const CommState& s_;
};

bool is_slot(const Tensor& part, const Tensor& whole, std::size_t element_offset) {
  return part.data() != nullptr &&
         bytes_of(part.data()) == bytes_of(whole.data()) + element_offset * whole.element_size();
}

// Of counts whose whole sum Check::sum() has checked: a prefix cannot wrap.
std::size_t prefix_sum(std::span<const std::size_t> c) {
  return std::accumulate(c.begin(), c.end(), std::size_t{0});
}

// The fields every op takes from its main tensor. Each prepare_* fills the rest of this object in
// place and returns it by name, so the arguments are built once and never copied.
Prepared prepared(OpType op, const Tensor& t) {
  Prepared p;
  p.args.op = op;
  p.args.op_name = to_string(op);
  p.args.dtype = t.dtype();
  p.args.device = t.device();
  p.args.stream = t.stream();
  return p;
}

}  // namespace

Prepared prepare_p2p(const CommState& s, OpType op, const Tensor& t, int peer,
                     const CallOptions& o) {
  Check c(op, s);
  c.tensor(t, op == OpType::send ? "tensor" : "tensor (receive buffer)");
  c.rank_arg(peer, op == OpType::send ? "dst" : "src");
  if (o.tag < 0) c.fail("{}: tag {} must be >= 0", to_string(op), o.tag);
  Prepared p = prepared(op, t);
  OpArgs& a = p.args;
  a.in = t.data();
  a.out = t.data();
  a.count = t.count();
  a.root = peer;
  a.tag = o.tag;
  p.bytes = t.nbytes();
  return p;
}

Prepared prepare_broadcast(const CommState& s, const Tensor& t, int root) {
  Check c(OpType::broadcast, s);
  c.tensor(t, "tensor");
  c.rank_arg(root, "root");
  Prepared p = prepared(OpType::broadcast, t);
  OpArgs& a = p.args;
  a.in = t.data();
  a.out = t.data();
  a.count = t.count();
  a.root = root;
  a.in_place = true;
  p.bytes = t.nbytes();
  return p;
}

Prepared prepare_reduce(const CommState& s, OpType op, const Tensor& in, const Tensor& out,
                        ReduceOp r, int root) {
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
  Prepared p = prepared(op, in);
  OpArgs& a = p.args;
  a.reduce = r;
  a.in = in.data();
  a.out = writes_output ? out.data() : nullptr;
  a.count = in.count();
  // No elements, no place: empty buffers may be null on one rank and not on another, and
  // verification compares the place of an all_reduce.
  a.in_place = writes_output && in.data() == out.data() && in.count() > 0;
  if (writes_output) c.no_partial_overlap(in, out, a.in_place);
  a.root = root;
  p.bytes = in.nbytes();
  return p;
}

Prepared prepare_all_gather(const CommState& s, const Tensor& in, const Tensor& out) {
  Check c(OpType::all_gather, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.count(out, c.times_ranks(in, "input"), "output", "it must hold size() * input count");
  Prepared p = prepared(OpType::all_gather, in);
  OpArgs& a = p.args;
  a.in = in.data();
  a.out = out.data();
  a.count = in.count();
  a.in_place = is_slot(in, out, static_cast<std::size_t>(s.rank) * in.count());
  c.no_partial_overlap(in, out, a.in_place);
  p.bytes = out.nbytes();
  return p;
}

Prepared prepare_all_gather_v(const CommState& s, const Tensor& in, const Tensor& out,
                              std::span<const std::size_t> counts) {
  Check c(OpType::all_gather_v, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.counts(counts, "counts");
  c.count(in, counts[static_cast<std::size_t>(s.rank)], "input", "counts[rank()] says");
  c.count(out, c.sum(counts, "counts"), "output", "the sum of counts is");
  const std::size_t displ = prefix_sum(counts.first(static_cast<std::size_t>(s.rank)));
  Prepared p = prepared(OpType::all_gather_v, in);
  OpArgs& a = p.args;
  a.in = in.data();
  a.out = out.data();
  a.count = in.count();
  a.send_counts = counts.data();
  a.in_place = is_slot(in, out, displ);
  c.no_partial_overlap(in, out, a.in_place);
  p.bytes = out.nbytes();
  return p;
}

Prepared prepare_gather(const CommState& s, const Tensor& in, const Tensor& out, int root) {
  Check c(OpType::gather, s);
  c.rank_arg(root, "root");
  c.tensor(in, "input");
  Prepared p = prepared(OpType::gather, in);
  OpArgs& a = p.args;
  a.in = in.data();
  a.count = in.count();
  a.root = root;
  if (s.rank == root) {
    c.tensor(out, "output");
    c.same_type(in, out);
    c.count(out, c.times_ranks(in, "input"), "output",
            "on the root it must hold size() * input count");
    a.out = out.data();
    a.in_place = in.count() > 0 && is_slot(in, out, static_cast<std::size_t>(root) * in.count());
    c.no_partial_overlap(in, out, a.in_place);
  }
  p.bytes = in.nbytes() * static_cast<std::size_t>(s.size);
  return p;
}

Prepared prepare_scatter(const CommState& s, const Tensor& in, const Tensor& out, int root) {
  Check c(OpType::scatter, s);
  c.rank_arg(root, "root");
  c.tensor(out, "output");
  Prepared p = prepared(OpType::scatter, out);
  OpArgs& a = p.args;
  a.out = out.data();
  a.count = out.count();
  a.root = root;
  if (s.rank == root) {
    c.tensor(in, "input");
    c.same_type(in, out);
    c.count(in, c.times_ranks(out, "output"), "input",
            "on the root it must hold size() * output count");
    a.in = in.data();
    a.in_place = out.count() > 0 && is_slot(out, in, static_cast<std::size_t>(root) * out.count());
    c.no_partial_overlap(in, out, a.in_place);
  }
  p.bytes = out.nbytes() * static_cast<std::size_t>(s.size);
  return p;
}

Prepared prepare_reduce_scatter(const CommState& s, const Tensor& in, const Tensor& out,
                                ReduceOp r) {
  Check c(OpType::reduce_scatter, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.reduce(r, in.dtype());
  c.count(in, c.times_ranks(out, "output"), "input", "it must hold size() * output count");
  Prepared p = prepared(OpType::reduce_scatter, in);
  OpArgs& a = p.args;
  a.reduce = r;
  a.in = in.data();
  a.out = out.data();
  a.count = out.count();
  a.in_place = out.count() > 0 && is_slot(out, in, static_cast<std::size_t>(s.rank) * out.count());
  c.no_partial_overlap(in, out, a.in_place);
  p.bytes = in.nbytes();
  return p;
}

Prepared prepare_all_to_all(const CommState& s, const Tensor& in, const Tensor& out) {
  Check c(OpType::all_to_all, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.count(out, in.count(), "output", "it must match the input's count");
  if (in.count() % static_cast<std::size_t>(s.size) != 0) {
    c.fail("all_to_all: input count {} is not divisible by the communicator size {}", in.count(),
           s.size);
  }
  Prepared p = prepared(OpType::all_to_all, in);
  OpArgs& a = p.args;
  a.in = in.data();
  a.out = out.data();
  a.count = in.count() / static_cast<std::size_t>(s.size);
  a.in_place = in.data() != nullptr && in.data() == out.data();
  c.no_partial_overlap(in, out, a.in_place);
  p.bytes = in.nbytes();
  return p;
}

Prepared prepare_all_to_all_v(const CommState& s, const Tensor& in, std::span<const std::size_t> sc,
                              const Tensor& out, std::span<const std::size_t> rc,
                              const CallOptions& o) {
  Check c(OpType::all_to_all_v, s);
  c.tensor(in, "input");
  c.tensor(out, "output");
  c.same_type(in, out);
  c.counts(sc, "send_counts");
  c.counts(rc, "recv_counts");
  c.count(in, c.sum(sc, "send_counts"), "input", "the sum of send_counts is");
  c.count(out, c.sum(rc, "recv_counts"), "output", "the sum of recv_counts is");
  // What a rank sends itself is what it receives from itself: a backend copies send_counts[rank]
  // elements into a slot of recv_counts[rank] (past its end when larger). Known locally, so every
  // such rank raises before any blocks.
  const auto me = static_cast<std::size_t>(s.rank);
  if (sc[me] != rc[me]) {
    c.fail(
        "all_to_all_v: send_counts[{}] = {} but recv_counts[{}] = {}: what rank {} sends to "
        "itself is what it receives from itself, so the two must be equal",
        me, sc[me], me, rc[me], me);
  }
  Prepared p = prepared(OpType::all_to_all_v, in);
  OpArgs& a = p.args;
  a.in = in.data();
  a.out = out.data();
  a.send_counts = sc.data();
  a.recv_counts = rc.data();
  a.in_place = in.data() != nullptr && in.data() == out.data();
  if (a.in_place && !std::equal(sc.begin(), sc.end(), rc.begin())) {
    c.fail(
        "all_to_all_v: in place (input and output are the same buffer) needs send_counts == "
        "recv_counts");
  }
  c.no_partial_overlap(in, out, a.in_place);
  p.bytes = o.size_hint;
  return p;
}

}  // namespace mcr::detail
