#include "output_path.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "mcr/errors.hpp"

namespace mcr::cli {

bool writable(const std::string& path, std::string_view flag, std::string* why) {
  namespace fs = std::filesystem;
  const auto refuse = [&](const std::string& reason) {
    if (why != nullptr)
      *why = fmt::format("{} '{}': the file cannot be written ({})", flag, path, reason);
    return false;
  };
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (fs::is_directory(path, ec)) return refuse("it is a directory");
    // "a": opens for writing without truncating or writing anything.
    std::FILE* f = std::fopen(path.c_str(), "a");
    if (f == nullptr) return refuse(std::strerror(errno));
    std::fclose(f);
    return true;
  }
  // A new file (or a dangling link): its directory must take it. Nothing is created to find out.
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) return refuse(fmt::format("no directory '{}'", dir.string()));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return refuse(std::strerror(errno));
  return true;
}

bool replaceable(const std::string& path, std::string_view flag, std::string* why) {
  namespace fs = std::filesystem;
  if (!writable(path, flag, why)) return false;
  // Written beside the file and renamed over it (TuningTable::save): the directory of the file a
  // link names must take a new file, even where the file itself can be opened for writing.
  std::error_code ec;
  const fs::path target = fs::exists(path, ec) ? fs::canonical(path, ec) : fs::path(path);
  fs::path dir = (ec ? fs::path(path) : target).parent_path();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    if (why != nullptr) {
      *why = fmt::format("{} '{}': the file cannot be replaced (its directory '{}': {})", flag,
                         path, dir.string(), std::strerror(errno));
    }
    return false;
  }
  return true;
}

void check_writable(const std::string& path, std::string_view flag) {
  std::string why;
  if (!writable(path, flag, &why)) throw InvalidArgument(why);
}

}  // namespace mcr::cli
