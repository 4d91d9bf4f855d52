// The communication log's hooks into init()/finalize(): MCR_LOG=summary|trace attaches a log to the
// world communicator (inherited by sub-communicators); finalize() writes it (collective).
#pragma once

#include "mcr/communicator.hpp"

namespace mcr::detail {

/// Called by init() on the world communicator; attaches a log when MCR_LOG asks for one.
void attach_env_comm_log(Communicator& world);
/// Called by finalize() before teardown, on every rank: writes the summary / trace if one is
/// attached.
void finish_env_comm_log(Communicator& world);

}  // namespace mcr::detail
