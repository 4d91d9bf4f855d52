// Bandwidth conventions of nccl-tests (S = the op's byte count, docs/tuning-format.md) and the
// median, shared by the communication log's records and summary and by the benchmark library. They
// live in the runtime so that the log does not depend on the benchmark library (which depends on
// the runtime); `mcr::bench` re-exports them (mcr/bench/bandwidth.hpp).
#pragma once

#include <cstddef>
#include <vector>

#include "mcr/comm/types.hpp"

namespace mcr {

/// busbw / algbw: 2(n-1)/n for all_reduce; (n-1)/n for all_gather(v), reduce_scatter,
/// all_to_all(v), gather and scatter; 1 for broadcast, reduce, send/recv and barrier (nccl-tests
/// src/*.cu). 0 for fewer than one rank.
double bus_factor(OpType op, int ranks) noexcept;
/// S / t in GB/s (1e9 bytes per second); 0 when `seconds` is not positive.
double algbw_gbps(std::size_t bytes, double seconds) noexcept;
/// algbw * bus_factor.
double busbw_gbps(OpType op, std::size_t bytes, double seconds, int ranks) noexcept;

/// Median of the values (mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace mcr
