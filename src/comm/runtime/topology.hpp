// Which ranks share a host: the world's host map (from the identities every rank reported at
// start-up) and a communicator's view of it (how many hosts it spans, how many of its ranks each
// holds). Tuning tables key on it (a table tuned on 4 hosts x 1 rank is not the right table for
// 2 x 2), and composed collectives use it to form "my host" and "same local index" groups.
#pragma once

#include <string>
#include <vector>

namespace mcr::detail {

/// For each identity (one per world rank, bootstrap/host.hpp), the index of its host: hosts are
/// numbered in order of their first rank, so rank 0's host is host 0.
std::vector<int> host_indices(const std::vector<std::string>& identities);

/// A communicator's members as seen by host.
struct GroupTopology {
  int hosts = 1;
  /// Ranks of this communicator on each of its hosts when every host holds the same number;
  /// 0 when they differ (e.g. 3 + 1).
  int ranks_per_host = 1;
  std::vector<int> host_of_member;  ///< group rank -> host index within the group (0..hosts-1)
  std::vector<int> local_index;     ///< group rank -> position among the members on its host

  bool uniform() const noexcept { return ranks_per_host > 0; }
  /// "4x1", "2x2", or "3 hosts, uneven" for messages.
  std::string describe() const;
};

/// The topology of the members `world_ranks` (group rank -> world rank) under the world's host map
/// `host_of_world_rank` (world rank -> host index; empty: every rank on one host).
GroupTopology group_topology(const std::vector<int>& host_of_world_rank,
                             const std::vector<int>& world_ranks);

}  // namespace mcr::detail
