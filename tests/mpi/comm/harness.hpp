// The shared main of the multi-rank test programs: mcr::init() before the tests, one verdict for
// the whole job after them (a failure on any rank fails every rank), failures printed with the
// rank.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm.hpp"

namespace mcr::test {

/// The world communicator from mcr::init().
Communicator& world();

/// "rank 2/4": prefix for failure messages, so a log of interleaved ranks stays readable.
std::string rank_tag();

/// The value of `--name=value` among the program's arguments (after gtest removed its own), else
/// of the environment variable `env_name`, else `fallback`.
std::string option(std::string_view name, const char* env_name, std::string fallback);

/// Remembers the last operation each communicator reported as completed: the tests check that a
/// forced backend really ran the operation.
class LastOpObserver : public OpObserver {
 public:
  void on_complete(const OpRecord& record) noexcept override;
  /// The last record seen (backend is static storage), and how many were seen in total.
  OpRecord last() const;
  std::size_t seen() const;

 private:
  mutable std::mutex mutex_;
  OpRecord last_{};
  std::size_t seen_ = 0;
};

/// The observer attached to world() (and inherited by communicators created from it).
LastOpObserver& observer();

class FileStore;
/// The store the world was formed through when MCR_TEST_GIVEN_STORE is set, else nullptr.
FileStore* given_store();

}  // namespace mcr::test
