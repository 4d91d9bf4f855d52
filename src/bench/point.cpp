// One benchmark point: verifiable buffers for an operation, its timed loop and its check.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "checks.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/comm/device_buffer.hpp"
#include "mcr/comm/launch.hpp"
#include "mcr/comm/work.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Calls fn(T*) with a null pointer of the C++ element type of `dtype`.
template <class Fn>
decltype(auto) with_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn(static_cast<float*>(nullptr));
    case DType::f64:
      return fn(static_cast<double*>(nullptr));
    case DType::f16:
      return fn(static_cast<Half*>(nullptr));
    case DType::bf16:
      return fn(static_cast<BFloat16*>(nullptr));
    case DType::i8:
      return fn(static_cast<std::int8_t*>(nullptr));
    case DType::u8:
      return fn(static_cast<std::uint8_t*>(nullptr));
    case DType::i32:
      return fn(static_cast<std::int32_t*>(nullptr));
    case DType::i64:
      return fn(static_cast<std::int64_t*>(nullptr));
  }
  return fn(static_cast<float*>(nullptr));
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// A value the benchmark never produces, so an output the op did not write is counted as wrong:
// every input and result is an integer within what pattern_value() keeps exact, so 0.5 for the
// floating-point types, and the end of an integer type's range that no sum reaches. (A fixed 99
// was the exact sum of 17 ranks' inputs, or 9 ranks' in u8.)
template <class T>
T sentinel() {
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    return std::numeric_limits<T>::max();  // u8 sums stay at or below 254 (pattern_value)
  } else if constexpr (std::is_integral_v<T>) {
    return std::numeric_limits<T>::lowest();  // signed sums stay above -128
  } else {
    return from_double<T>(0.5);
  }
}

// The largest magnitude a sum may reach in `dtype` and stay exact: the integer range of the 8-bit
// types, the integers that bf16's and f16's significands hold.
double exact_limit(DType dtype) {
  switch (dtype) {
    case DType::i8:
      return 127;
    case DType::u8:
      return 255;
    case DType::bf16:
      return 256;
    case DType::f16:
      return 2048;
    default:
      return 1u << 24;  // f32's significand; wider types hold more
  }
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::min:
      return std::min(a, b);
    case ReduceOp::max:
      return std::max(a, b);
    default:
      return a + b;
  }
}

}  // namespace

int summed_ranks(OpType op, ReduceOp reduce, int ranks) noexcept {
  return is_reduction(op) && reduce == ReduceOp::sum ? ranks : 1;
}

double pattern_value(std::uint64_t seed, int rank, std::size_t index, DType dtype,
                     int ranks) noexcept {
  // splitmix64 of (seed, rank, index): cheap, and different on every rank and element.
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull +
                    static_cast<std::uint64_t>(rank) * 0xBF58476D1CE4E5B9ull +
                    index * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // [-k, k] (u8: [0, 2k]) with k = 6 while `ranks` such values sum exactly in the dtype (up to
  // 21 ranks in every dtype), then smaller: k ranks' worth of the limit.
  const double n = std::max(ranks, 1);
  const double k = std::min(6.0, std::floor(exact_limit(dtype) / (dtype == DType::u8 ? 2 * n : n)));
  const auto v = static_cast<double>(z % (2 * static_cast<std::uint64_t>(k) + 1));
  return dtype == DType::u8 ? v : v - k;
}

Layout layout_for(OpType op, std::size_t nominal_bytes, DType dtype, int ranks) {
  const std::size_t e = dtype_size(dtype);
  const auto n = static_cast<std::size_t>(std::max(ranks, 1));
  const std::size_t units = std::max<std::size_t>(1, nominal_bytes / e);
  const std::size_t chunk = std::max<std::size_t>(1, units / n);
  Layout l;
  switch (op) {
    case OpType::barrier:
      return l;
    case OpType::all_gather:
    case OpType::all_gather_v:
    case OpType::gather:
      l = {chunk, n * chunk, chunk, n * chunk * e};
      break;
    case OpType::reduce_scatter:
    case OpType::scatter:
      l = {n * chunk, chunk, chunk, n * chunk * e};
      break;
    case OpType::all_to_all:
    case OpType::all_to_all_v:
      l = {n * chunk, n * chunk, chunk, n * chunk * e};
      break;
    default:  // send/recv, broadcast, reduce, all_reduce: one message of `units` elements
      l = {units, units, units, units * e};
      break;
  }
  return l;
}

std::vector<std::size_t> distinct_sizes(OpType op, const std::vector<std::size_t>& nominal,
                                        DType dtype, int ranks) {
  std::vector<std::size_t> out;
  std::vector<std::size_t> seen;
  for (std::size_t s : nominal) {
    const auto bytes = layout_for(op, s, dtype, ranks).bytes;
    if (std::find(seen.begin(), seen.end(), bytes) != seen.end()) continue;
    seen.push_back(bytes);
    out.push_back(s);
  }
  return out;
}

namespace detail {

void check_point_arguments(OpType op, int root, ReduceOp reduce, int ranks) {
  if (has_root(op) && (root < 0 || root >= ranks)) {
    throw InvalidArgument(fmt::format("options.root {}: must be a rank in [0, {}) ({} has a root)",
                                      root, ranks, to_string(op)));
  }
  if (is_reduction(op) && reduce != ReduceOp::sum && reduce != ReduceOp::min &&
      reduce != ReduceOp::max) {
    throw InvalidArgument(
        fmt::format("options.reduce {}: the benchmark verifies sum, min and max only ({} reduces)",
                    to_string(reduce), to_string(op)));
  }
}

}  // namespace detail

Point::Point(Communicator comm, const PointConfig& config)
    : comm_(std::move(comm)), config_(config) {
  const int n = comm_.size();
  detail::check_point_arguments(config_.op, config_.root, config_.reduce, n);
  if (config_.in_place && !has_in_place(config_.op)) {
    throw InvalidArgument(fmt::format("in-place: {} has no in-place form", to_string(config_.op)));
  }
  layout_ = layout_for(config_.op, config_.nominal_bytes, config_.dtype, n);
  const std::size_t e = dtype_size(config_.dtype);
  in_.resize(layout_.in_count * e);
  out_.resize(layout_.out_count * e);
  counts_.assign(static_cast<std::size_t>(n), layout_.chunk);
  if (config_.device.is_cuda()) {
    device_in_ = DeviceBuffer(config_.device, in_.size());
    device_out_ = DeviceBuffer(config_.device, out_.size());
  }
  fill();  // timed iterations run on the verifiable pattern too, not on whatever memory held
  to_device();
}

void Point::device_sync() const {
  if (config_.device.is_cuda()) synchronize(config_.device);
}

void Point::to_device() {
  if (!config_.device.is_cuda()) return;
  device_in_.copy_from_host(in_.data(), in_.size());
  device_out_.copy_from_host(out_.data(), out_.size());
}

void Point::from_device() {
  if (!config_.device.is_cuda()) return;
  device_in_.copy_to_host(in_.data(), in_.size());
  device_out_.copy_to_host(out_.data(), out_.size());
}

Device bench_device(std::string_view kind) {
  if (kind == "cpu") return Device::cpu();
  if (kind != "cuda")
    throw InvalidArgument(fmt::format("options.device '{}': must be cpu or cuda", kind));
  const int count = device_count(Device::Kind::cuda);
  if (count < 1) {
    throw InvalidArgument(
        "options.device cuda: no CUDA device is present (or this build has no CUDA support)");
  }
  // The launcher's local rank picks the device, as init() reads it (a given store needs no
  // rendezvous address here: the bench has formed its world already).
  return Device::cuda(launch_info(/*store_given=*/true).local_rank % count);
}

void Point::fill() {
  const auto& c = config_;
  const int r = comm_.rank();
  with_type(c.dtype, [&]<class T>(T*) {
    auto* in = reinterpret_cast<T*>(in_.data());
    auto* out = reinterpret_cast<T*>(out_.data());
    std::fill(out, out + layout_.out_count, sentinel<T>());
    // The input region: the whole input buffer, or, in place, where the op reads its input from.
    T* input = in;
    std::size_t count = layout_.in_count;
    if (c.in_place) {
      switch (c.op) {
        case OpType::all_gather:
        case OpType::all_gather_v:
          input = out + static_cast<std::size_t>(r) * layout_.chunk;
          break;
        case OpType::gather:
          if (r == c.root) input = out + static_cast<std::size_t>(r) * layout_.chunk;
          break;
        case OpType::reduce_scatter:
        case OpType::scatter:
          break;  // the input buffer also holds the output slot
        default:  // all_reduce, reduce, all_to_all(_v), broadcast: one buffer
          input = out;
          count = layout_.out_count;
          break;
      }
    }
    if (c.op == OpType::broadcast) {  // one buffer: the source on root, the destination elsewhere
      input = out;
      count = layout_.out_count;
      if (r != c.root) return;
    }
    for (std::size_t i = 0; i < count; ++i)
      input[i] = from_double<T>(
          pattern_value(c.seed, r, i, c.dtype, summed_ranks(c.op, c.reduce, comm_.size())));
    return;
  });
}

void Point::run_once(const CallOptions& opts, std::vector<Work>& pending) {
  const auto& c = config_;
  const int r = comm_.rank();
  const int n = comm_.size();
  const bool gpu = c.device.is_cuda();
  const Tensor in(gpu ? device_in_.data() : in_.data(), layout_.in_count, c.dtype, c.device);
  const Tensor out(gpu ? device_out_.data() : out_.data(), layout_.out_count, c.dtype, c.device);
  const auto chunk = layout_.chunk;
  const auto slot = static_cast<std::size_t>(r) * chunk;
  const bool a = c.async;
  auto put = [&](Work w) { pending.push_back(std::move(w)); };
  switch (c.op) {
    case OpType::send:
    case OpType::recv:
      // Post the receive first; both directions run at once, so a ring never waits on itself.
      put(comm_.irecv(out, (r + n - 1) % n, opts));
      put(comm_.isend(in, (r + 1) % n, opts));
      if (!a) {
        for (auto& w : pending)
          w.wait();
        pending.clear();
      }
      return;
    case OpType::broadcast:
      a ? put(comm_.ibroadcast(out, c.root, opts)) : comm_.broadcast(out, c.root, opts);
      return;
    case OpType::reduce:
      if (c.in_place) {
        a ? put(comm_.ireduce(out, c.reduce, c.root, opts))
          : comm_.reduce(out, c.reduce, c.root, opts);
      } else {
        a ? put(comm_.ireduce(in, out, c.reduce, c.root, opts))
          : comm_.reduce(in, out, c.reduce, c.root, opts);
      }
      return;
    case OpType::all_reduce:
      if (c.in_place) {
        a ? put(comm_.iall_reduce(out, c.reduce, opts)) : comm_.all_reduce(out, c.reduce, opts);
      } else {
        a ? put(comm_.iall_reduce(in, out, c.reduce, opts))
          : comm_.all_reduce(in, out, c.reduce, opts);
      }
      return;
    case OpType::all_gather: {
      const Tensor src = c.in_place ? out.slice(slot, chunk) : in;
      a ? put(comm_.iall_gather(src, out, opts)) : comm_.all_gather(src, out, opts);
      return;
    }
    case OpType::all_gather_v: {
      const Tensor src = c.in_place ? out.slice(slot, chunk) : in;
      a ? put(comm_.iall_gather_v(src, out, counts_, opts))
        : comm_.all_gather_v(src, out, counts_, opts);
      return;
    }
    case OpType::gather: {
      const bool alias = c.in_place && r == c.root;
      const Tensor src = alias ? out.slice(slot, chunk) : in;
      a ? put(comm_.igather(src, out, c.root, opts)) : comm_.gather(src, out, c.root, opts);
      return;
    }
    case OpType::scatter: {
      const bool alias = c.in_place && r == c.root;
      const Tensor dst = alias ? in.slice(slot, chunk) : out;
      a ? put(comm_.iscatter(in, dst, c.root, opts)) : comm_.scatter(in, dst, c.root, opts);
      return;
    }
    case OpType::reduce_scatter: {
      const Tensor dst = c.in_place ? in.slice(slot, chunk) : out;
      a ? put(comm_.ireduce_scatter(in, dst, c.reduce, opts))
        : comm_.reduce_scatter(in, dst, c.reduce, opts);
      return;
    }
    case OpType::all_to_all: {
      const Tensor src = c.in_place ? out : in;
      a ? put(comm_.iall_to_all(src, out, opts)) : comm_.all_to_all(src, out, opts);
      return;
    }
    case OpType::all_to_all_v: {
      CallOptions o = opts;
      o.size_hint = layout_.bytes;  // the per-rank buffer, as for all_to_all
      const Tensor src = c.in_place ? out : in;
      a ? put(comm_.iall_to_all_v(src, counts_, out, counts_, o))
        : comm_.all_to_all_v(src, counts_, out, counts_, o);
      return;
    }
    case OpType::barrier:
      a ? put(comm_.ibarrier(opts)) : comm_.barrier(opts);
      return;
  }
}

double Point::time(std::string_view backend, int iterations, int in_flight) {
  CallOptions opts;
  opts.backend = backend;
  pending_.clear();
  const auto window = static_cast<std::size_t>(std::max(in_flight, 0));
  const auto t0 = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    run_once(opts, pending_);
    // Counted in iterations, not handles: a send/recv iteration holds two.
    if (window > 0 && static_cast<std::size_t>(i + 1) % window == 0) {
      for (auto& w : pending_)
        w.wait();
      pending_.clear();
    }
  }
  for (auto& w : pending_)
    w.wait();
  device_sync();  // stream-ordered work must have finished inside the timed region
  const auto t1 = Clock::now();
  pending_.clear();
  return std::chrono::duration<double>(t1 - t0).count() / std::max(iterations, 1);
}

std::size_t Point::verify(std::string_view backend) {
  fill();
  to_device();
  CallOptions opts;
  opts.backend = backend;
  pending_.clear();
  run_once(opts, pending_);
  for (auto& w : pending_)
    w.wait();
  pending_.clear();
  from_device();
  return count_wrong();
}

void Point::reset() {
  fill();
  to_device();
}

void Point::issue(std::string_view backend, std::vector<Work>& pending) {
  CallOptions opts;
  opts.backend = backend;
  if (config_.async) {
    run_once(opts, pending);
    return;
  }
  // The sync send/recv pair waits for what it appended: keep the caller's handles out of that.
  std::vector<Work> mine;
  run_once(opts, mine);
  for (auto& w : mine)
    w.wait();
  device_sync();
}

std::size_t Point::wrong() {
  device_sync();
  from_device();
  return count_wrong();
}

std::size_t Point::count_wrong() const {
  const auto& c = config_;
  const int r = comm_.rank();
  const int n = comm_.size();
  const auto chunk = layout_.chunk;
  const int summed = summed_ranks(c.op, c.reduce, n);
  auto v = [&](int q, std::size_t j) { return pattern_value(c.seed, q, j, c.dtype, summed); };
  auto reduced = [&](std::size_t j) {
    double acc = v(0, j);
    for (int q = 1; q < n; ++q)
      acc = combine(c.reduce, acc, v(q, j));
    return acc;
  };
  return with_type(c.dtype, [&]<class T>(T*) -> std::size_t {
    const auto* in = reinterpret_cast<const T*>(in_.data());
    const auto* out = reinterpret_cast<const T*>(out_.data());
    std::size_t wrong = 0;
    auto expect = [&](const T* got, std::size_t count, auto&& expected) {
      for (std::size_t i = 0; i < count; ++i) {
        // Stored through the dtype, as the op's result is: exact for the small integers used.
        if (to_double(got[i]) != to_double(from_double<T>(expected(i)))) ++wrong;
      }
    };
    const auto slot = static_cast<std::size_t>(r) * chunk;
    switch (c.op) {
      case OpType::send:
      case OpType::recv:
        expect(out, chunk, [&](std::size_t i) { return v((r + n - 1) % n, i); });
        break;
      case OpType::broadcast:
        expect(out, chunk, [&](std::size_t i) { return v(c.root, i); });
        break;
      case OpType::reduce:
        if (r == c.root) expect(out, chunk, reduced);
        break;
      case OpType::all_reduce:
        expect(out, chunk, reduced);
        break;
      case OpType::all_gather:
      case OpType::all_gather_v:
        expect(out, n * chunk,
               [&](std::size_t j) { return v(static_cast<int>(j / chunk), j % chunk); });
        break;
      case OpType::gather:
        if (r == c.root) {
          expect(out, n * chunk,
                 [&](std::size_t j) { return v(static_cast<int>(j / chunk), j % chunk); });
        }
        break;
      case OpType::scatter: {
        const T* dst = c.in_place && r == c.root ? in + slot : out;
        expect(dst, chunk, [&](std::size_t i) { return v(c.root, slot + i); });
        break;
      }
      case OpType::reduce_scatter: {
        const T* dst = c.in_place ? in + slot : out;
        expect(dst, chunk, [&](std::size_t i) { return reduced(slot + i); });
        break;
      }
      case OpType::all_to_all:
      case OpType::all_to_all_v:
        expect(out, n * chunk,
               [&](std::size_t j) { return v(static_cast<int>(j / chunk), slot + j % chunk); });
        break;
      case OpType::barrier:
        break;
    }
    return wrong;
  });
}

}  // namespace mcr::bench
