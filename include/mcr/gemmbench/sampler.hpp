// The warmup + sampling loop shared by every runner, so that CPU and GPU numbers are taken the same
// way. Public so that it can be tested with a fake clock, and reused for other timed kernels.
#pragma once

#include <functional>

#include "mcr/gemmbench/runner.hpp"

namespace mcr::codesign::bench {

/// Runs `calls` GEMM calls back to back (rotating buffers) and returns their elapsed seconds.
using TimedCalls = std::function<double(int calls)>;

/// Warmup, then timed samples per `options`. A sample groups enough calls to last about
/// `sample_target_s`, so tiny GEMMs are not dominated by timer resolution. Fills every Timing field
/// except the buffer ones.
Timing run_samples(const TimedCalls& run_calls, const MeasureOptions& options,
                   double sample_target_s);

}  // namespace mcr::codesign::bench
