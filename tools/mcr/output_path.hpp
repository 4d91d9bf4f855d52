// Output files of the subcommands that measure for minutes before they write: checked first.
#pragma once

#include <string>
#include <string_view>

namespace mcr::cli {

/// Throws InvalidArgument naming `flag` when `path` cannot be written: its directory is missing or
/// not writable, or the file exists and cannot be opened for writing. Nothing is created, written
/// or truncated, so a run that fails later leaves everything as it was.
void check_writable(const std::string& path, std::string_view flag);

/// Whether check_writable(path, flag) would pass; `why` receives its message when it would not.
bool writable(const std::string& path, std::string_view flag, std::string* why);

/// As writable(), for a file written beside itself and renamed over (a tuning table): the directory
/// of the file (of the file a link names) must take a new file too.
bool replaceable(const std::string& path, std::string_view flag, std::string* why);

}  // namespace mcr::cli
