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

/// The backend for `parent` (whose flat backends are `flat`, in priority order).
std::unique_ptr<Backend> make_hier_backend(CommState& parent, std::vector<Backend*> flat,
                                           HierConfig config, GroupTopology view);

/// Collective over `parent`, at the end of its creation: splits off the "my host" and "same local
/// index" sub-communicators of its hier backend (when it has one) and keeps them. Forming them
/// here, inside the collective that creates the communicator, means a composed operation never
/// blocks to form them.
void form_hier_groups(CommState& parent);

/// True while form_hier_groups() creates sub-communicators: they get no hier of their own (a
/// composed step must run on a flat backend, and simulated hosts would otherwise nest).
bool forming_hier_groups() noexcept;

/// Called before `b` starts the synchronous operation `args`. When `b` blocks the thread inside
/// its library for it (a synchronous collective of a backend that needs host progress: MPI) while
/// composed operations are in flight on this process, completes those first, progressing every
/// backend: their remaining steps are issued only by this thread's progress() calls, which a
/// blocked library call would withhold from peers waiting for them (docs/design.md, rule 4).
void finish_composed_before_blocking(const Backend& b, const OpArgs& args);

/// Completes every composed operation in flight on this process (progressing every backend).
/// Called before anything that may block in a library regardless of the operation: a split.
void finish_composed_ops();

}  // namespace mcr::detail
