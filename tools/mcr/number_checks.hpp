// Range checks for numeric flags whose errors state the rule: CLI11's NonNegativeNumber and
// PositiveNumber print "Value 0 not in range 0.000000 to 1797...(300 digits)", which names
// neither the rule nor, for a positive flag, why 0 failed.
#pragma once

#include <CLI/CLI.hpp>

namespace mcr::cli {

/// A number >= `bound` ("--seq: 0 must be a number >= 1").
CLI::Validator at_least(double bound);

}  // namespace mcr::cli
