// A flight record dumped on demand before init() is a process alone's (rank 0 of 1); once init()
// has placed the process in its job, its records are its world rank's. The configuration read by
// the early dump was kept for the rest of the process: every rank of the job wrote its timeout
// and crash records to flight-rank0.json, each over the others'.
#include <cstdio>
#include <string>

#include "mcr/comm.hpp"

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

int main() {
  const std::string before = mcr::dump_flight_record();
  mcr::Communicator world = mcr::init();
  const std::string after = mcr::dump_flight_record();
  const int rank = world.rank();
  const std::string mine = "/flight-rank" + std::to_string(rank) + ".json";
  int failures = 0;
  if (!ends_with(before, "/flight-rank0.json")) {
    std::printf("dump_before_init: FAIL: the dump before init() went to %s\n", before.c_str());
    ++failures;
  }
  // A snapshot goes to the record file while nothing explains a failure in it, else beside it.
  if (!ends_with(after, mine) &&
      after.find("/flight-rank" + std::to_string(rank) + ".later-") == std::string::npos) {
    std::printf("dump_before_init: FAIL: rank %d's dump after init() went to %s, not %s\n", rank,
                after.c_str(), mine.c_str());
    ++failures;
  }
  world = mcr::Communicator();
  mcr::finalize();
  if (failures == 0) std::printf("dump_before_init: rank %d OK (%s)\n", rank, after.c_str());
  return failures == 0 ? 0 : 1;
}
