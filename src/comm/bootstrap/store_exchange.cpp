#include "bootstrap/store_exchange.hpp"

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

class StoreExchange final : public Exchange {
 public:
  StoreExchange(Store& store, int rank, int size, std::chrono::milliseconds timeout)
      : store_(store), rank_(rank), size_(size), timeout_(timeout) {}

  std::vector<Bytes> all_gather(const Bytes& mine) override {
    // Every rank counts its calls, so call k uses the same key space on every rank.
    const std::uint64_t round = round_++;
    store_.set(key(round, rank_), mine);
    std::vector<Bytes> all(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) {
        all[static_cast<std::size_t>(r)] = mine;
        continue;
      }
      try {
        all[static_cast<std::size_t>(r)] = store_.get(key(round, r), timeout_);
      } catch (const TimeoutError& e) {
        throw TimeoutError(never_joined(r, round, e.what()), "exchange", round, "store");
      } catch (const BackendError& e) {
        throw BackendError(never_joined(r, round, e.what()));
      }
    }
    return all;
  }

 private:
  // The message when a rank's part never arrived: it names the rank, not the store key.
  std::string never_joined(int r, std::uint64_t round, std::string_view why) const {
    return fmt::format(
        "rank {} of {} never joined the world's exchange #{} within {} ms (rank {} waited for "
        "it): was it started, with WORLD_SIZE={} and the same MASTER_ADDR/MASTER_PORT, and did "
        "it fail before init()? (store: {})",
        r, size_, round, timeout_.count(), rank_, size_, why);
  }

  static std::string key(std::uint64_t round, int rank) {
    return fmt::format("mcr/exchange/{}/{}", round, rank);
  }

  Store& store_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::uint64_t round_ = 0;
};

}  // namespace

std::unique_ptr<Exchange> make_store_exchange(Store& store, int rank, int size,
                                              std::chrono::milliseconds timeout) {
  if (size < 1) throw InvalidArgument(fmt::format("make_store_exchange: size {} is < 1", size));
  if (rank < 0 || rank >= size) {
    throw InvalidArgument(
        fmt::format("make_store_exchange: rank {} is outside [0, {})", rank, size));
  }
  return std::make_unique<StoreExchange>(store, rank, size, timeout);
}

}  // namespace mcr::detail
