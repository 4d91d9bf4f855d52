// Bandwidth conventions, op lists and size sweeps of the benchmark engine.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "mcr/bench.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {

double bus_factor(OpType op, int ranks) noexcept {
  if (ranks < 1) return 0.0;
  const double n = ranks;
  switch (op) {
    case OpType::all_reduce:
      return 2.0 * (n - 1) / n;
    case OpType::all_gather:
    case OpType::all_gather_v:
    case OpType::reduce_scatter:
    case OpType::all_to_all:
    case OpType::all_to_all_v:
    case OpType::gather:
    case OpType::scatter:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

double algbw_gbps(std::size_t bytes, double seconds) noexcept {
  return seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0;
}

double busbw_gbps(OpType op, std::size_t bytes, double seconds, int ranks) noexcept {
  return algbw_gbps(bytes, seconds) * bus_factor(op, ranks);
}

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
  return op != OpType::send && op != OpType::recv && op != OpType::barrier;
}

std::vector<std::size_t> geometric_sizes(std::size_t begin, std::size_t end, double factor) {
  if (begin > end) {
    throw InvalidArgument(fmt::format(
        "-b {} is larger than -e {}: the first size must not exceed the last", begin, end));
  }
  if (!(factor > 1.0))
    throw InvalidArgument(fmt::format("-f {}: the step factor must be > 1", factor));
  std::vector<std::size_t> sizes;
  double s = static_cast<double>(begin);
  for (std::size_t cur = begin; cur <= end;) {
    sizes.push_back(cur);
    if (cur == 0) {
      if (end == 0) break;
      cur = 1;
      s = 1;
      continue;
    }
    s *= factor;
    const auto next = static_cast<std::size_t>(std::llround(s));
    if (next <= cur) {  // a factor close to 1 must still make progress
      cur += 1;
      s = static_cast<double>(cur);
    } else {
      cur = next;
    }
  }
  return sizes;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

RatioEstimate paired_ratio(const std::vector<double>& numerators,
                           const std::vector<double>& denominators) {
  std::vector<double> r;
  const std::size_t n = std::min(numerators.size(), denominators.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (denominators[i] > 0) r.push_back(numerators[i] / denominators[i]);
  }
  RatioEstimate e;
  e.pairs = r.size();
  if (r.empty()) return e;
  e.median = median(r);
  std::sort(r.begin(), r.end());
  const double m = static_cast<double>(r.size());
  const double below = std::floor(m / 2 - 0.98 * std::sqrt(m)) - 1;  // 0-based rank
  const auto k = r.size() < 6 || below < 0 ? std::size_t{0} : static_cast<std::size_t>(below);
  e.low = r[k];
  e.high = r[r.size() - 1 - k];
  return e;
}

TimeReduce parse_time_reduce(std::string_view name) {
  if (name == "max") return TimeReduce::max;
  if (name == "min") return TimeReduce::min;
  if (name == "avg") return TimeReduce::avg;
  throw InvalidArgument(fmt::format("--time '{}': must be one of max, min, avg", name));
}

}  // namespace mcr::bench
