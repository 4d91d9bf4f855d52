// Process-wide state shared by the flight recorder's units: the live rings, the configuration read
// from the environment, and the dump writer.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace mcr::detail {

class FlightRecorder;

struct FlightRegistry {
  std::mutex mu;  // taken on communicator creation and destruction and by dumps, never per op
  std::vector<FlightRecorder*> live;
};
FlightRegistry& flight_registry();

struct FlightConfig {
  std::size_t entries = 256;  // MCR_FLIGHT_ENTRIES
  std::string dir;            // MCR_FLIGHT_DIR; empty: no automatic dumps
  std::string path;           // <dir>/flight-rank<world rank>.json
  std::string host;
  long pid = 0;
  int world_rank = 0;
  int world_size = 1;
};
/// Read once the runtime exists (the first communicator, inside init()) and kept; asked before,
/// a process alone's (rank 0 of 1), not kept. Throws InvalidArgument on bad values.
const FlightConfig& flight_config();
/// The checks flight_config() makes (MCR_FLIGHT_ENTRIES, MCR_FLIGHT_DIR can be created), without
/// reading the configuration: init() makes them with its other inputs, before anything blocks, as
/// the world rank the configuration names is not known yet.
void check_flight_env();

/// The dump of every live communicator of this process, as JSON text; `snapshot`: a dump of a
/// live job (SIGUSR1, on demand), which explains no failure.
std::string flight_record_json(std::string_view reason, bool snapshot,
                               std::size_t* communicators = nullptr);
/// Writes `text` to `path` through a temporary file and a rename; false on failure.
bool write_whole_file(const std::string& path, const std::string& text) noexcept;

}  // namespace mcr::detail
