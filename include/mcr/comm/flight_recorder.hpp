// The flight recorder's public entry point: every communicator keeps its last operations
// (MCR_FLIGHT_ENTRIES, default 256), dumped as JSON on timeout, crash or request into
// MCR_FLIGHT_DIR; `mcr doctor DIR` reads the dumps of all ranks (docs/reliability.md).
#pragma once

#include <string>

namespace mcr {

/// Writes this process's flight record (every live communicator's recent operations) as JSON to
/// `path`, or, when `path` is empty, to MCR_FLIGHT_DIR/flight-rank<world rank>.json (beside it,
/// as flight-rank<N>.later-<k>.json, where a failure's record is there already; a later failure's
/// record replaces this one). Returns the path written. Not collective: each rank dumps its own
/// view. Throws InvalidArgument when no path is given and MCR_FLIGHT_DIR is unset, Error when the
/// file cannot be written.
std::string dump_flight_record(const std::string& path = {});

}  // namespace mcr
