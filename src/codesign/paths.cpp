#include "mcr/codesign/paths.hpp"

#include <cstdlib>
#include <system_error>

namespace mcr::codesign {
namespace {

bool holds_catalog(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir / "devices", ec);
}

}  // namespace

std::filesystem::path data_dir() {
  // The environment wins so that an installed binary (or a test) can point at another catalog.
  if (const char* env = std::getenv("MCR_DATA_DIR"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env);
  }
  // An installed program finds the data installed beside it (<prefix>/bin -> <prefix>/share/mcr),
  // wherever the prefix was moved; a program in the build tree finds the source tree's data; a
  // program of another project linked against an installed mcr finds the configured prefix's.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path().parent_path() / "share" / "mcr";
    if (holds_catalog(beside)) return beside;
  }
  const std::filesystem::path source(MCR_SOURCE_DATA_DIR);
  if (holds_catalog(source)) return source;
  return std::filesystem::path(MCR_INSTALL_DATA_DIR);
}

}  // namespace mcr::codesign
