// Parsing of GEMM sweep dimensions: a comma-separated list whose items are single values or
// inclusive `start:end[:step]` ranges, e.g. "64,127,128" or "256:4096:256" or "1,8:64:8".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mcr::codesign::bench {

/// Largest number of values one dimension may expand to; guards against typos like "1:1e9".
inline constexpr std::size_t kMaxDimValues = 100000;
/// Most GEMMs a grid (m x n x k x batch values x dtypes) may hold: checked before any is made.
inline constexpr std::size_t kMaxGridGemms = 100000;

/// Expands `text` into positive values, in the order written (duplicates kept). Throws
/// mcr::InvalidArgument naming `argument`, the offending text and the rule it breaks.
std::vector<std::int64_t> parse_dim_values(std::string_view text, std::string_view argument);

}  // namespace mcr::codesign::bench
