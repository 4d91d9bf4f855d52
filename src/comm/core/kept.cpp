#include "core/kept.hpp"

#include <mutex>
#include <vector>

namespace mcr::detail {

void keep_until_exit(std::shared_ptr<const void> what) noexcept {
  // Never destroyed: library threads, and the process's exit, may outlive any static destructor.
  static auto& mutex = *new std::mutex;
  static auto& kept = *new std::vector<std::shared_ptr<const void>>;
  try {
    std::lock_guard lock(mutex);
    kept.push_back(std::move(what));
  } catch (...) {  // out of memory: leak it rather than free what a library may still use
    try {
      (void)new std::shared_ptr<const void>(std::move(what));
    } catch (...) {  // NOLINT(bugprone-empty-catch): nothing is left to hold it with
    }
  }
}

}  // namespace mcr::detail
