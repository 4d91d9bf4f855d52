#include "runtime/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "mcr/errors.hpp"

namespace mcr::detail {

std::vector<int> host_indices(const std::vector<std::string>& identities) {
  std::map<std::string, int> index;
  std::vector<int> out;
  out.reserve(identities.size());
  for (const auto& id : identities) {
    const auto [it, added] = index.emplace(id, static_cast<int>(index.size()));
    out.push_back(it->second);
  }
  return out;
}

std::string GroupTopology::describe() const {
  if (uniform()) return fmt::format("{}x{}", hosts, ranks_per_host);
  return fmt::format("{} hosts, uneven", hosts);
}

GroupTopology group_topology(const std::vector<int>& host_of_world_rank,
                             const std::vector<int>& world_ranks) {
  GroupTopology t;
  std::map<int, int> group_host;  // world host index -> host index within the group
  std::vector<int> on_host;       // members counted so far per group host
  t.host_of_member.reserve(world_ranks.size());
  t.local_index.reserve(world_ranks.size());
  for (const int w : world_ranks) {
    // No host map (a process that never formed a world): one host.
    int world_host = 0;
    if (!host_of_world_rank.empty()) {
      if (w < 0 || static_cast<std::size_t>(w) >= host_of_world_rank.size()) {
        throw InvalidArgument(
            fmt::format("group_topology: world rank {} outside the host map of {} ranks", w,
                        host_of_world_rank.size()));
      }
      world_host = host_of_world_rank[static_cast<std::size_t>(w)];
    }
    const auto [it, added] = group_host.emplace(world_host, static_cast<int>(group_host.size()));
    if (added) on_host.push_back(0);
    t.host_of_member.push_back(it->second);
    t.local_index.push_back(on_host[static_cast<std::size_t>(it->second)]++);
  }
  t.hosts = std::max<int>(1, static_cast<int>(group_host.size()));
  const bool same =
      std::all_of(on_host.begin(), on_host.end(), [&](int n) { return n == on_host.front(); });
  t.ranks_per_host = on_host.empty() ? 1 : (same ? on_host.front() : 0);
  return t;
}

}  // namespace mcr::detail
