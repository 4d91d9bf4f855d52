// What can be benchmarked: op lists and names, root and in-place forms, and size sweeps.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "mcr/bench/point.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {

std::vector<OpType> benchmark_ops() {
  std::vector<OpType> ops;
  for (OpType op : kAllOpTypes) {
    if (op != OpType::recv) ops.push_back(op);
  }
  return ops;
}

OpType parse_bench_op(std::string_view name, std::string_view argument) {
  if (name == "send_recv" || name == "sendrecv" || name == "recv") return OpType::send;
  auto op = parse_op(name);
  if (!op) {
    std::string known;
    for (OpType o : benchmark_ops())
      known += fmt::format("{}{}", known.empty() ? "" : ", ", to_string(o));
    throw InvalidArgument(
        fmt::format("{} '{}': unknown operation (known: {}, or 'all')", argument, name, known));
  }
  return *op;
}

bool has_root(OpType op) noexcept {
  return op == OpType::broadcast || op == OpType::reduce || op == OpType::gather ||
         op == OpType::scatter;
}

bool has_in_place(OpType op) noexcept {
  // Broadcast has one buffer (the source on the root, the destination elsewhere): its one form
  // would otherwise be timed twice, once labelled out of place.
  return op != OpType::send && op != OpType::recv && op != OpType::barrier &&
         op != OpType::broadcast;
}

bool skip_single_rank_p2p(int ranks, OpType op) noexcept {
  return (op == OpType::send || op == OpType::recv) && ranks < 2;
}

std::vector<std::size_t> geometric_sizes(std::size_t begin, std::size_t end, double factor) {
  if (begin > end) {
    throw InvalidArgument(fmt::format(
        "-b {} is larger than -e {}: the first size must not exceed the last", begin, end));
  }
  // Infinite, it swept -b alone.
  if (!(factor > 1.0) || !std::isfinite(factor))
    throw InvalidArgument(
        fmt::format("-f {}: the step factor must be a finite number > 1", factor));
  // A factor close to 1 over a wide range would list more sizes than any sweep can run.
  constexpr std::size_t kMaxSizes = 100000;
  // 2^64: the first double no size_t reaches; every s below it converts exactly.
  constexpr double kPastSizeT = 18446744073709551616.0;
  std::vector<std::size_t> sizes;
  double s = static_cast<double>(begin);
  for (std::size_t cur = begin;;) {
    sizes.push_back(cur);
    if (sizes.size() > kMaxSizes) {
      throw InvalidArgument(fmt::format(
          "-b {} -e {} -f {} makes more than {} sizes: use a larger step factor or a narrower "
          "range",
          begin, end, factor, kMaxSizes));
    }
    if (cur >= end) break;
    if (cur == 0) {
      cur = 1;
      s = 1;
      continue;
    }
    s *= factor;
    // Past what a size can hold, before converting: near 2^64 the conversion would overflow and
    // the sweep never end. (Past `end` is decided on the rounded size: 51.26 is the size 51.)
    if (s >= kPastSizeT) break;
    auto next = static_cast<std::size_t>(std::round(s));
    if (next <= cur) {  // a factor close to 1 must still make progress
      next = cur + 1;   // cur < end: no overflow
      s = static_cast<double>(next);
    }
    if (next > end) break;
    cur = next;
  }
  return sizes;
}

}  // namespace mcr::bench
