// The shared main of the multi-rank test programs: mcr::init() before the tests, one verdict for
// the whole job after them (a failure on any rank fails every rank), failures printed with the
// rank.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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

/// Address space for `bytes` that no page backs until it is touched: for counts past a library's
/// limit, which a call must refuse without reading or writing a byte. data() is null when the
/// mapping failed.
class Reserved {
 public:
  explicit Reserved(std::size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(p);
  }
  ~Reserved() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  Reserved(const Reserved&) = delete;
  Reserved& operator=(const Reserved&) = delete;
  std::uint8_t* data() const { return data_; }

 private:
  std::size_t bytes_;
  std::uint8_t* data_ = nullptr;
};

}  // namespace mcr::test
