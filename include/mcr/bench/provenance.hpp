// Provenance of a tuning table: where, when, with which libraries and by which command it was
// measured.
#pragma once

#include <map>
#include <string>

#include "mcr/comm/communicator.hpp"

namespace mcr::bench {

/// Provenance of a table measured on `comm`: hosts (count, as Communicator::hosts()), host_names,
/// ranks, ranks per host (Communicator::ranks_per_host(), "uneven" when 0), CPU model, library
/// versions, usable backends, UTC date and `command`. Collective.
std::map<std::string, std::string> provenance(Communicator& comm, const std::string& command);

/// The command line of this process, from /proc/self/cmdline (empty where there is none), with
/// arguments that hold blanks or quotes quoted, for the `command` of provenance().
std::string command_line();

}  // namespace mcr::bench
