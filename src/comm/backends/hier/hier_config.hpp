// MCR_HIER: how the composed backend `hier` chooses its two libraries, parsed and checked before
// any rank blocks (docs/hier-backend.md).
#pragma once

#include <string>
#include <string_view>

namespace mcr::detail {

/// The composed backend's name: always built, as it runs on whatever flat backends are up.
inline constexpr std::string_view kHierBackend = "hier";

struct HierConfig {
  /// Backend of the steps within a host, or empty: chosen per step by the selector of the
  /// "my host" sub-communicator (rules, tuning table, default priority).
  std::string intra;
  /// Backend of the steps between hosts (ranks with the same local index), or empty: selected.
  std::string inter;
  /// Testing on one machine: treat consecutive blocks of this many ranks of a communicator as
  /// its hosts instead of the host map. 0: the real host map.
  int simulate_ranks_per_host = 0;

  /// Canonical text for the cross-rank configuration check ("intra=mpi;inter=auto").
  std::string canonical() const;
};

/// Parses "intra=mpi;inter=gloo" (items separated by ';' or ','; keys intra, inter,
/// simulate_ranks_per_host; each at most once; backends by name or "auto"). `source` names the
/// input in errors ("MCR_HIER='...'").
HierConfig parse_hier_config(std::string_view text, std::string_view source);

/// MCR_HIER from the environment; the defaults (both selected, real hosts) when unset.
HierConfig read_hier_config();

}  // namespace mcr::detail
