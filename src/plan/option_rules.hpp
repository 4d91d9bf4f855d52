#pragma once
// The ranges of the pricing options, one rule each, shared by the flags (to_plan_options) and by
// validation files (options_from_json) so the two cannot drift apart. `where` names the argument
// as the caller's user wrote it ("request.dp_bucket_mb", "options.dp_bucket_mb").

#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "mcr/errors.hpp"

namespace mcr::plan {

/// A bucket under one byte would make the bucket count exceed the gradients' bytes.
inline void check_dp_bucket_mb(std::string_view where, double mb) {
  if (!(std::isfinite(mb) && mb >= 1e-6)) {
    throw InvalidArgument(fmt::format(
        "{} {}: must be a positive, finite number of megabytes (10^6 bytes), at least 1e-06 (one "
        "byte)",
        where, mb));
  }
}

/// A negative or infinite per-parameter size would surface as a strange memory figure.
inline void check_bytes_per_param(std::string_view where, double bytes,
                                  std::string_view zero = {}) {
  if (!(std::isfinite(bytes) && bytes >= 0)) {
    throw InvalidArgument(fmt::format(
        "{} {}: must be a finite number of bytes per parameter >= 0{}", where, bytes, zero));
  }
}

}  // namespace mcr::plan
