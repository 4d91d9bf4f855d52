// The command line's names for the fields that library errors name: the planner says
// "layout.tp 3 ..." or "model.heads 12 ...", a program sets those fields, and `mcr` shows the flag
// that sets them ("--tp 3 ..."). One table (field_flags.cpp) holds every pair.
#pragma once

#include <string>
#include <string_view>

namespace mcr::cli {

/// `message` with every field the table knows replaced by its flag; other text unchanged.
std::string with_flag_names(std::string_view message);

}  // namespace mcr::cli
