// The process's first communication failure, and abandoning every communicator after one.
#include "core/failure.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "core/state.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

// Never destroyed, as the engine (state.hpp): communicators torn down among the static
// destructors may still note a failure.
std::mutex& failure_mutex() {
  static auto& m = *new std::mutex;
  return m;
}

std::string& first_failure() {
  static auto& s = *new std::string;
  return s;
}

// Communicators abandoned by finalize() after a failure. Never destroyed (see the header).
std::vector<std::shared_ptr<CommState>>& abandoned() {
  static auto& v = *new std::vector<std::shared_ptr<CommState>>;
  return v;
}

}  // namespace

namespace {
std::atomic<bool> exiting{false};
}  // namespace

void note_exiting_on_error() noexcept {
  exiting.store(true);
}
bool exiting_on_error() noexcept {
  return exiting.load();
}

void note_failure(std::string_view reason) noexcept {
  try {
    std::lock_guard lock(failure_mutex());
    if (first_failure().empty()) first_failure() = std::string(reason);
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory while noting: nothing better
  }
}

std::string failure_reason() {
  std::lock_guard lock(failure_mutex());
  return first_failure();
}

void clear_failure() noexcept {
  std::lock_guard lock(failure_mutex());
  first_failure().clear();
  exiting.store(false);
}

void abandon_all_communicators(std::string_view reason) noexcept {
  for (CommState* c : engine().live_comms()) {
    try {
      c->abandon(reason);
      if (auto keep = c->weak_from_this().lock()) abandoned().push_back(std::move(keep));
    } catch (...) {  // NOLINT(bugprone-empty-catch): finalize must not throw; the rest still go
    }
  }
}

}  // namespace mcr::detail
