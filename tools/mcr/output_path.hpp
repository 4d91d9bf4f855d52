// Output files of the subcommands that measure for minutes before they write: checked first.
#pragma once

#include <string>
#include <string_view>

namespace mcr::cli {

/// Throws InvalidArgument naming `flag` when `path` cannot be written: its directory is missing or
/// not writable, or the file exists and cannot be opened for writing. The file is left as it was
/// (created and removed again when it did not exist), so a run that fails later overwrites nothing.
void check_writable(const std::string& path, std::string_view flag);

/// Whether check_writable(path, flag) would pass; `why` receives its message when it would not.
bool writable(const std::string& path, std::string_view flag, std::string* why);

}  // namespace mcr::cli
