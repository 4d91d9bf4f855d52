// Range checks for numeric flags whose errors state the rule: CLI11's NonNegativeNumber and
// PositiveNumber print "Value 0 not in range 0.000000 to 1797...(300 digits)", which names
// neither the rule nor, for a positive flag, why 0 failed.
#pragma once

#include <CLI/CLI.hpp>

namespace mcr::cli {

/// A number >= `bound` ("--seq: 0 must be a number >= 1"); with `whole`, an integer ("1.5" was
/// refused by CLI11's conversion, which did not say a whole number was needed).
CLI::Validator at_least(double bound, bool whole = false);
/// at_least(bound, true): for integer flags.
inline CLI::Validator whole_at_least(double bound) {
  return at_least(bound, true);
}

}  // namespace mcr::cli
