#include "refuse_flags.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mcr/errors.hpp"

namespace mcr::cli {
namespace {

[[noreturn]] void refuse(std::string_view flag, std::string_view why) {
  throw InvalidArgument(fmt::format("{} {}; drop {}", flag, why, flag));
}

}  // namespace

void refuse_flags(const CLI::App& cmd, std::initializer_list<const char*> flags,
                  std::string_view why) {
  for (const char* flag : flags) {
    if (cmd.count(flag) > 0) refuse(flag, why);
  }
}

void refuse_all_but(const CLI::App& cmd, std::initializer_list<std::string_view> allowed,
                    std::string_view why) {
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || name == "--help") continue;
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    refuse(name, why);
  }
}

}  // namespace mcr::cli
