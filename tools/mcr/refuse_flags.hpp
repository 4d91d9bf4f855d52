// Flags a subcommand's chosen mode would not read are refused, naming the flag, rather than
// dropped without a word: one rule for every subcommand.
#pragma once

#include <initializer_list>
#include <string_view>

namespace CLI {
class App;
}

namespace mcr::cli {

/// Throws InvalidArgument "<flag> <why>; drop <flag>" for the first of `flags` given on `cmd`.
void refuse_flags(const CLI::App& cmd, std::initializer_list<const char*> flags,
                  std::string_view why);

/// The same for every option given on `cmd` other than `allowed` (and --help).
void refuse_all_but(const CLI::App& cmd, std::initializer_list<std::string_view> allowed,
                    std::string_view why);

}  // namespace mcr::cli
