// The sampling flags of `mcr gemm` (--warmup ... --rotate-bytes).
#pragma once

#include "mcr/gemmbench/runner.hpp"

namespace CLI {
class App;
}

namespace mcr::cli {

/// Registers --warmup, --warmup-time, --min-samples, --max-samples, --min-time, --max-time and
/// --rotate-bytes on `cmd`, each setting its field of `options`.
void add_measure_flags(CLI::App* cmd, codesign::bench::MeasureOptions& options);

}  // namespace mcr::cli
