#include "backends/gloo/gloo_ops.hpp"

#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include "backends/gloo/gloo_check.hpp"
#include "core/local_reduce.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

using GlooReduceFn = void (*)(void*, const void*, const void*, std::size_t);
using GlooReduceFunc = gloo::AllreduceOptions::Func;

template <class T>
GlooReduceFn native_reduce_for(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return static_cast<GlooReduceFn>(&gloo::sum<T>);
    case ReduceOp::prod:
      return static_cast<GlooReduceFn>(&gloo::product<T>);
    case ReduceOp::min:
      return static_cast<GlooReduceFn>(&gloo::min<T>);
    case ReduceOp::max:
      return static_cast<GlooReduceFn>(&gloo::max<T>);
    default:
      return nullptr;
  }
}

// Gloo's own element-wise kernels, for the types and ops it has them.
GlooReduceFn native_reduce(ReduceOp op, DType dtype) {
  switch (dtype) {
    case DType::f32:
      return native_reduce_for<float>(op);
    case DType::f64:
      return native_reduce_for<double>(op);
    case DType::i8:
      return native_reduce_for<std::int8_t>(op);
    case DType::u8:
      return native_reduce_for<std::uint8_t>(op);
    case DType::i32:
      return native_reduce_for<std::int32_t>(op);
    case DType::i64:
      return native_reduce_for<std::int64_t>(op);
    default:
      return nullptr;  // half types and bitwise ops: ours
  }
}

// Gloo's reduce callback is c = a (op) b, where c may alias a (never b in gloo's algorithms; the
// b case is handled anyway since every op here is commutative). Ours is inout (op)= in.
GlooReduceFunc reduce_callback(ReduceOp op, DType dtype) {
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  if (GlooReduceFn native = native_reduce(combine, dtype)) return native;
  ReduceFn fn = reduce_function(combine, dtype);
  if (fn == nullptr) {
    throw UnsupportedError(
        fmt::format("gloo: no reduction {} for dtype {}", to_string(op), to_string(dtype)));
  }
  const std::size_t esize = dtype_size(dtype);
  return [fn, esize](void* c, const void* a, const void* b, std::size_t n) {
    if (c == b) {
      fn(c, a, n);
      return;
    }
    if (c != a) std::memcpy(c, a, n * esize);
    fn(c, b, n);
  };
}

// Scratch kept by the thread that runs collectives, grown to the largest size it needed. A buffer
// allocated per call is zero-filled and, when large, faulted in page by page on every call: at
// 64 MiB that made a reduce_scatter take a second instead of 0.1 s. Collectives on one thread run
// one after another, so one buffer per thread serves them all.
template <class T>
T* thread_scratch(std::size_t count) {
  thread_local std::vector<std::byte> buffer;
  if (buffer.size() < count * sizeof(T)) buffer.resize(count * sizeof(T));
  return reinterpret_cast<T*>(buffer.data());
}

std::size_t prefix_sum(const std::vector<std::size_t>& counts, int upto) {
  return std::accumulate(counts.begin(), counts.begin() + upto, std::size_t{0});
}

// Runs one collective with elements of T, a stand-in of the dtype's size: gloo only needs the
// element size for data movement, and reductions go through reduce_callback().
template <class T>
class TypedCollective {
 public:
  TypedCollective(const std::shared_ptr<gloo::Context>& ctx, const GlooCollective& c)
      : ctx_(ctx),
        c_(c),
        a_(c.args),
        rank_(ctx->rank),
        size_(ctx->size),
        n_(c.args.count),
        in_(const_cast<T*>(static_cast<const T*>(c.args.in))),
        out_(static_cast<T*>(c.args.out)),
        site_{c.args.op_name, c.args.sequence, ctx->rank} {}

  void run() {
    switch (a_.op) {
      case OpType::broadcast:
        return broadcast();
      case OpType::reduce:
        return reduce();
      case OpType::all_reduce:
        return all_reduce();
      case OpType::all_gather:
        return all_gather();
      case OpType::all_gather_v:
        return all_gather_v();
      case OpType::gather:
        return gather();
      case OpType::scatter:
        return scatter();
      case OpType::reduce_scatter:
        return reduce_scatter();
      case OpType::all_to_all:
        return all_to_all();
      case OpType::all_to_all_v:
        return all_to_all_v();
      case OpType::barrier:
        return barrier();
      case OpType::send:
      case OpType::recv:
        break;
    }
    throw BackendError(fmt::format("gloo: {} is not a collective", a_.op_name));
  }

 private:
  template <class Options>
  void common(Options& o) {
    o.setTag(c_.tag);
    o.setTimeout(c_.timeout);
  }

  void finish_avg(T* data, std::size_t n) {
    if (a_.reduce == ReduceOp::avg) divide_in_place(a_.dtype, data, n, size_);
  }

  void broadcast() {
    T* buf = out_ != nullptr ? out_ : in_;
    gloo::BroadcastOptions o(ctx_);
    o.setOutput(buf, n_);
    o.setRoot(a_.root);
    common(o);
    MCR_GLOO_CHECK(site_, gloo::broadcast(o));
  }

  void all_reduce() {
    gloo::AllreduceOptions o(ctx_);
    if (!a_.in_place && in_ != nullptr && in_ != out_) o.setInput(in_, n_);
    o.setOutput(out_, n_);
    o.setReduceFunction(reduce_callback(a_.reduce, a_.dtype));
    common(o);
    MCR_GLOO_CHECK(site_, gloo::allreduce(o));
    finish_avg(out_, n_);
  }

  void reduce() {
    gloo::ReduceOptions o(ctx_);
    std::vector<T> scratch;
    if (rank_ == a_.root) {
      if (!a_.in_place && in_ != nullptr && in_ != out_) o.setInput(in_, n_);
      o.setOutput(out_, n_);
    } else {
      // Gloo's ring uses the output as scratch on every rank; a non-root's buffers must stay
      // untouched, so it reduces into a buffer of its own.
      scratch.resize(n_);
      o.setInput(in_ != nullptr ? in_ : out_, n_);
      o.setOutput(scratch.data(), n_);
    }
    o.setRoot(a_.root);
    o.setReduceFunction(reduce_callback(a_.reduce, a_.dtype));
    common(o);
    MCR_GLOO_CHECK(site_, gloo::reduce(o));
    if (rank_ == a_.root) finish_avg(out_, n_);
  }

  void all_gather() {
    gloo::AllgatherOptions o(ctx_);
    T* own_slot = out_ + static_cast<std::size_t>(rank_) * n_;
    if (!a_.in_place && in_ != nullptr && in_ != own_slot) o.setInput(in_, n_);
    o.setOutput(out_, n_ * static_cast<std::size_t>(size_));
    common(o);
    MCR_GLOO_CHECK(site_, gloo::allgather(o));
  }

  void all_gather_v() {
    const auto& counts = c_.send_counts;
    gloo::AllgathervOptions o(ctx_);
    T* own_slot = out_ + prefix_sum(counts, rank_);
    if (!a_.in_place && in_ != own_slot) o.setInput(in_, counts[static_cast<std::size_t>(rank_)]);
    o.setOutput(out_, counts);
    common(o);
    MCR_GLOO_CHECK(site_, gloo::allgatherv(o));
  }

  void gather() {
    gloo::GatherOptions o(ctx_);
    std::vector<T> own;
    if (rank_ == a_.root) {
      T* own_slot = out_ + static_cast<std::size_t>(rank_) * n_;
      if (a_.in_place || in_ == nullptr || in_ == own_slot) {
        // Gloo copies the root's input into its slot; give it a copy so source and destination
        // never overlap.
        own.assign(own_slot, own_slot + n_);
        o.setInput(own.data(), n_);
      } else {
        o.setInput(in_, n_);
      }
      o.setOutput(out_, n_ * static_cast<std::size_t>(size_));
    } else {
      o.setInput(in_, n_);
    }
    o.setRoot(a_.root);
    common(o);
    MCR_GLOO_CHECK(site_, gloo::gather(o));
  }

  void scatter() {
    gloo::ScatterOptions o(ctx_);
    std::vector<T> own;
    if (rank_ == a_.root) {
      std::vector<T*> slots(static_cast<std::size_t>(size_));
      for (int r = 0; r < size_; ++r)
        slots[static_cast<std::size_t>(r)] = in_ + r * n_;
      o.setInputs(slots, n_);
      T* own_slot = in_ + static_cast<std::size_t>(rank_) * n_;
      if (a_.in_place || out_ == nullptr || out_ == own_slot) {
        own.resize(n_);  // the root's share is already in place; gloo's copy goes here
        o.setOutput(own.data(), n_);
      } else {
        o.setOutput(out_, n_);
      }
    } else {
      o.setOutput(out_, n_);
    }
    o.setRoot(a_.root);
    common(o);
    MCR_GLOO_CHECK(site_, gloo::scatter(o));
  }

  void reduce_scatter() {
    // Gloo 0.5 has no reduce-scatter on unbound buffers: all-reduce the whole input into
    // scratch and keep this rank's slot. Twice the traffic of a native one, but exact.
    const std::size_t total = n_ * static_cast<std::size_t>(size_);
    T* full = thread_scratch<T>(total);
    gloo::AllreduceOptions o(ctx_);
    o.setInput(in_, total);
    o.setOutput(full, total);
    o.setReduceFunction(reduce_callback(a_.reduce, a_.dtype));
    common(o);
    MCR_GLOO_CHECK(site_, gloo::allreduce(o));
    std::memcpy(out_, full + static_cast<std::size_t>(rank_) * n_, n_ * sizeof(T));
    finish_avg(out_, n_);
  }

  void all_to_all() {
    const std::size_t total = n_ * static_cast<std::size_t>(size_);
    std::vector<T> copy;
    T* src = in_;
    if (a_.in_place || in_ == out_) {
      copy.assign(out_, out_ + total);  // gloo reads the input while writing the output
      src = copy.data();
    }
    gloo::AlltoallOptions o(ctx_);
    o.setInput(src, total);
    o.setOutput(out_, total);
    common(o);
    MCR_GLOO_CHECK(site_, gloo::alltoall(o));
  }

  void all_to_all_v() {
    std::vector<std::int64_t> send(c_.send_counts.begin(), c_.send_counts.end());
    std::vector<std::int64_t> recv(c_.recv_counts.begin(), c_.recv_counts.end());
    const std::size_t send_total = prefix_sum(c_.send_counts, size_);
    std::vector<T> copy;
    T* src = in_;
    if (a_.in_place || (in_ == out_ && in_ != nullptr)) {
      copy.assign(out_, out_ + send_total);
      src = copy.data();
    }
    // Empty buffers may be null; gloo still addresses them (with zero lengths).
    static T empty[1];
    gloo::AlltoallvOptions o(ctx_);
    o.setInput(src != nullptr ? src : empty, std::move(send));
    o.setOutput(out_ != nullptr ? out_ : empty, std::move(recv));
    common(o);
    MCR_GLOO_CHECK(site_, gloo::alltoallv(o));
  }

  void barrier() {
    gloo::BarrierOptions o(ctx_);
    common(o);
    MCR_GLOO_CHECK(site_, gloo::barrier(o));
  }

  const std::shared_ptr<gloo::Context>& ctx_;
  const GlooCollective& c_;
  const OpArgs& a_;
  const int rank_;
  const int size_;
  const std::size_t n_;
  T* const in_;
  T* const out_;
  const GlooCallSite site_;
};

}  // namespace

GlooCollective make_gloo_collective(const OpArgs& args, int group_size, std::uint32_t tag,
                                    std::chrono::milliseconds timeout) {
  GlooCollective c;
  c.args = args;
  const auto n = static_cast<std::size_t>(group_size);
  if (args.send_counts != nullptr) c.send_counts.assign(args.send_counts, args.send_counts + n);
  if (args.recv_counts != nullptr) c.recv_counts.assign(args.recv_counts, args.recv_counts + n);
  c.args.send_counts = nullptr;  // only the owned copies are used from here on
  c.args.recv_counts = nullptr;
  c.tag = tag;
  c.timeout = timeout;
  return c;
}

bool moves_nothing(const GlooCollective& c, int group_size) {
  switch (c.args.op) {
    case OpType::barrier:
      return false;
    case OpType::all_to_all_v:
      return false;  // counts differ per rank: a rank sending nothing may still receive
    case OpType::all_gather_v:
      return prefix_sum(c.send_counts, group_size) == 0;
    default:
      return c.args.count == 0;
  }
}

void run_gloo_collective(const std::shared_ptr<gloo::Context>& ctx, const GlooCollective& c) {
  switch (dtype_size(c.args.dtype)) {
    case 1:
      return TypedCollective<std::uint8_t>(ctx, c).run();
    case 2:
      return TypedCollective<std::uint16_t>(ctx, c).run();
    case 4:
      return TypedCollective<std::uint32_t>(ctx, c).run();
    case 8:
      return TypedCollective<std::uint64_t>(ctx, c).run();
    default:
      break;
  }
  throw BackendError(fmt::format("gloo: unexpected element size {} of dtype {}",
                                 dtype_size(c.args.dtype), to_string(c.args.dtype)));
}

}  // namespace mcr::detail
