#include "core/library_error.hpp"

#include <fmt/format.h>

namespace mcr::detail {

std::string format_call_error(std::string_view call, std::string_view file, int line,
                              const CallSite& site, std::string_view name, std::string_view text,
                              std::string_view more) {
  if (const auto slash = file.find_last_of('/'); slash != std::string_view::npos) {
    file = file.substr(slash + 1);
  }
  std::string where = site.rank >= 0 ? fmt::format("rank {}", site.rank) : std::string("rank ?");
  if (!site.op.empty()) where += fmt::format(", {}", site.op);
  std::string message =
      fmt::format("{} failed at {}:{} ({}): {}: {}", call, file, line, where, name, text);
  if (!more.empty()) message += fmt::format("; {}", more);
  return message;
}

}  // namespace mcr::detail
