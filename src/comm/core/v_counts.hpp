// The bound that some backends put on all_to_all_v's counts and displacements (MPI 3.1 takes C
// ints). One rule, read by the backend that refuses such an exchange before it calls its library
// and by the verification that makes every rank refuse it together (observe/verify.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace mcr::detail {

/// The first entry of one rank's all_to_all_v that a backend bounded by `limit` cannot carry.
struct CountPastLimit {
  const char* what;  ///< "send_counts", "send displacement", "recv_counts" or "recv displacement"
  std::size_t peer;  ///< the entry's index
  std::uint64_t value;
};

/// Scans peers in order; at each, the count and then its displacement (the running sum of the
/// counts before it), sends before receives. `recv` may be empty (all_gather_v's one table).
template <class Count>
std::optional<CountPastLimit> first_count_past_limit(std::span<const Count> send,
                                                     std::span<const Count> recv,
                                                     std::uint64_t limit) {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  for (std::size_t j = 0; j < send.size(); ++j) {
    const std::uint64_t out = send[j];
    const std::uint64_t in = j < recv.size() ? static_cast<std::uint64_t>(recv[j]) : 0;
    if (out > limit) return CountPastLimit{"send_counts", j, out};
    if (sent > limit) return CountPastLimit{"send displacement", j, sent};
    if (in > limit) return CountPastLimit{"recv_counts", j, in};
    if (received > limit) return CountPastLimit{"recv displacement", j, received};
    sent += out;
    received += in;
  }
  return std::nullopt;
}

}  // namespace mcr::detail
