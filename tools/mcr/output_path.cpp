#include "output_path.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mcr/errors.hpp"

namespace mcr::cli {

bool writable(const std::string& path, std::string_view flag, std::string* why) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  // "a": opens for writing without truncating what is there, and creates a missing file.
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    if (why != nullptr) {
      *why =
          fmt::format("{} '{}': the file cannot be written ({})", flag, path, std::strerror(errno));
    }
    return false;
  }
  std::fclose(f);
  if (!existed) std::filesystem::remove(path, ec);
  return true;
}

void check_writable(const std::string& path, std::string_view flag) {
  std::string why;
  if (!writable(path, flag, &why)) throw InvalidArgument(why);
}

}  // namespace mcr::cli
