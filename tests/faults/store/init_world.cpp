// One rank of a job that only forms the world and leaves: init(), one all-reduce whose result is
// checked, finalize(). Launched many times over by mcr_torchrun_launch to show that every rank of
// a large job gets through the store-based rendezvous, however late it arrives.
#include <cstdio>
#include <exception>
#include <vector>

#include "mcr/comm.hpp"

int main() {
  try {
    mcr::Communicator world = mcr::init();
    std::vector<int> v{1};
    world.all_reduce(v, mcr::ReduceOp::sum);
    if (v[0] != world.size()) {
      std::fprintf(stderr, "rank %d: all_reduce gave %d, expected %d\n", world.rank(), v[0],
                   world.size());
      return 1;
    }
    mcr::finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "init_world: %s\n", e.what());
    return 1;
  }
}
