// Diagnostic messages of the runtime, on stderr when MCR_DEBUG is set (read once).
#pragma once

#include <fmt/format.h>

#include <utility>

namespace mcr::detail {

bool debug_enabled() noexcept;
void log_line(const std::string& line);

template <class... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (debug_enabled()) log_line(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mcr::detail
