// init(), finalize(), then init() again in a process started alone (no launcher). mcr brought MPI
// up the first time and finalized it; MPI cannot be initialized twice, so the second runtime forms
// its world of one without MPI (the MPI backend is listed unusable, saying why) and works. Before,
// the second init() called MPI after MPI_Finalize, and Open MPI ended the process.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  fmt::print(stderr, "reinit: FAIL: {}\n", what);
  ++failures;
}

// An all_reduce of one element on the world of one: the value comes back as it went.
void all_reduce_works(mcr::Communicator& world, int round) {
  std::vector<int> v{41 + round};
  world.all_reduce(mcr::Tensor(v), mcr::ReduceOp::sum);
  check(v[0] == 41 + round, fmt::format("round {}: all_reduce gave {}", round, v[0]));
}

}  // namespace

int main() {
  {
    mcr::Communicator world = mcr::init();
    check(world.size() == 1, "the first world is not a world of one");
    all_reduce_works(world, 0);
  }
  mcr::finalize();
  check(!mcr::is_initialized(), "initialized after finalize()");
  {
    mcr::Communicator world = mcr::init();
    all_reduce_works(world, 1);
    const auto backends = world.backends();
    check(std::find(backends.begin(), backends.end(), "mpi") == backends.end(),
          "the second world brought MPI up again");
    for (const auto& b : mcr::runtime_info().backends) {  // "mpi" is listed when it is built
      if (b.name != "mpi") continue;
      check(!b.usable && b.reason.find("finalized") != std::string::npos,
            fmt::format("runtime_info() says of mpi: usable {}, '{}'", b.usable, b.reason));
    }
  }
  mcr::finalize();
  if (failures == 0) fmt::print("reinit: OK\n");
  return failures == 0 ? 0 : 1;
}
