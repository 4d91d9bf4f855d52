#include "mcr/codesign/paths.hpp"

#include <cstdlib>

namespace mcr::codesign {

std::filesystem::path data_dir() {
  // The environment wins so that an installed binary (or a test) can point at another catalog.
  if (const char* env = std::getenv("MCR_DATA_DIR"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env);
  }
  return std::filesystem::path(MCR_DATA_DIR);
}

}  // namespace mcr::codesign
