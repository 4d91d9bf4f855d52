// Small text helpers shared by the parsers of environment variables and rule files.
#pragma once

#include <string_view>

namespace mcr::detail {

/// `s` without its leading and trailing blanks (space, tab, CR, LF).
inline std::string_view trim(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const auto first = s.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kBlanks) - first + 1);
}

}  // namespace mcr::detail
