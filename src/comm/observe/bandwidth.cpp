// Bandwidth conventions of nccl-tests and the median (mcr/comm/bandwidth.hpp).
#include "mcr/comm/bandwidth.hpp"

#include <algorithm>

namespace mcr {

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

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace mcr
