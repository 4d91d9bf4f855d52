// A GEMM sweep: the cartesian grid of m, n, k, batch and dtype values, and/or the GEMMs of a model,
// run one after another on one runner.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mcr/codesign/gemm.hpp"
#include "mcr/gemmbench/measurement.hpp"
#include "mcr/gemmbench/runner.hpp"

namespace mcr::codesign::bench {

/// Every (m, n, k, batch, dtype) combination, in that nesting order (dtype outermost), with role
/// "grid" ("grid_bmm" when batch > 1).
std::vector<Gemm> grid_gemms(const std::vector<std::int64_t>& m, const std::vector<std::int64_t>& n,
                             const std::vector<std::int64_t>& k,
                             const std::vector<std::int64_t>& batch,
                             const std::vector<DType>& dtypes);

/// Called after each GEMM: (index from 0, total, the measurement just taken).
using SweepProgress = std::function<void(std::size_t, std::size_t, const GemmMeasurement&)>;

/// Times every GEMM. Identical shapes (same m, n, k, batch, dtype) are timed once and the timing is
/// reused, so a model whose blocks share a shape costs no extra time. A GEMM the backend rejects
/// with mcr::UnsupportedError is listed in `skipped` with the reason instead of ending the sweep.
/// Fills backend, backend_description, options, rows and skipped of the result.
MeasurementSet run_sweep(GemmRunner& runner, const std::vector<Gemm>& gemms,
                         const MeasureOptions& options, const SweepProgress& progress = {});

}  // namespace mcr::codesign::bench
