// What the fault-injection programs (tests/faults/peer/peer_kill, tests/cluster/collective_loop)
// share: `--name=value` arguments and the name of the error type a rank caught, for its report.
#pragma once

#include <exception>
#include <string_view>

#include "mcr/errors.hpp"

namespace mcr::test {

/// The value of `--name=value` among the arguments, else `fallback`.
inline std::string_view arg(int argc, char** argv, std::string_view name,
                            std::string_view fallback) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=') {
      return a.substr(name.size() + 1);
    }
  }
  return fallback;
}

/// The most specific mcr error type of `e`, as the reports name it.
inline const char* error_type_name(const std::exception& e) {
  if (dynamic_cast<const mcr::TimeoutError*>(&e) != nullptr) return "TimeoutError";
  if (dynamic_cast<const mcr::BackendError*>(&e) != nullptr) return "BackendError";
  if (dynamic_cast<const mcr::Error*>(&e) != nullptr) return "Error";
  return "std::exception";
}

}  // namespace mcr::test
