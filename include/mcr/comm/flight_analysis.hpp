// `mcr doctor`'s analysis as a library call: merges the flight records the ranks of a job wrote
// into a directory (MCR_FLIGHT_DIR) and says, per communicator, which ranks never reached or never
// completed the first unfinished operation, and the first sequence number at which ranks issued
// different operations. Format of the records and of the report: docs/reliability.md, "Flight
// recorder and `mcr doctor`".
#pragma once

#include <string>
#include <vector>

namespace mcr {

struct FlightDiagnosis {
  std::string json;           ///< the report as JSON (records, groups, laggards)
  std::string text;           ///< the same for a reader, as `mcr doctor` prints it
  std::vector<int> laggards;  ///< world ranks that never reached an operation others wait in
};

/// Reads every flight-rank<N>.json in `dir`. Throws InvalidArgument naming the directory when it
/// holds none, and the file and field when one is malformed.
FlightDiagnosis diagnose_flight_records(const std::string& dir);

}  // namespace mcr
