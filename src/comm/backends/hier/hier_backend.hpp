// The composed backend `hier`: collectives of a communicator that spans several hosts, run as
// sequential sub-operations on two cached sub-communicators — "my host" (one library) and "same
// local index" (another). See docs/hier-backend.md and docs/design.md ("Composed operations").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "hier_config.hpp"
#include "runtime/topology.hpp"

namespace mcr::detail {

class CommState;

/// The topology hier composes over: the communicator's own, or blocks of
/// `config.simulate_ranks_per_host` consecutive ranks when testing on one machine.
GroupTopology hier_view(const GroupTopology& real, int size, const HierConfig& config);

/// Why hier cannot compose anything on `view` ("the communicator spans one host"), or empty.
std::string hier_unusable_reason(const GroupTopology& view);

/// hier's registration (backends/registry.cpp): configured by MCR_HIER, created on every
/// communicator whose hosts it can compose over.
ComposedBackendFactory hier_composed_factory();

}  // namespace mcr::detail
