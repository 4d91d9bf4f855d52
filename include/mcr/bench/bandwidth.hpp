// The runtime's nccl-tests bandwidth conventions and median (mcr/comm/bandwidth.hpp), under the
// names the benchmark library has always used (mcr::bench::busbw_gbps, ...).
#pragma once

#include "mcr/comm/bandwidth.hpp"

namespace mcr::bench {

using mcr::algbw_gbps;
using mcr::bus_factor;
using mcr::busbw_gbps;
using mcr::median;

}  // namespace mcr::bench
