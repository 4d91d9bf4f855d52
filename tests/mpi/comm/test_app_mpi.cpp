// A job launched torchrun-style (no MPI launcher) whose application initializes MPI itself, as
// importing mpi4py does: each process's MPI world is itself alone. mcr forms its world of 2 through
// a given store and must leave MPI out (runtime_info() says why); before, MPI counted as usable on
// every rank, came first in the default priority, and each rank's all_reduce returned its own
// input. Run by mcr_torchrun_launch, with MCR_TEST_GIVEN_STORE set (a given store) or without it
// (mcr's own store at MASTER_ADDR:MASTER_PORT: init() raised there, "MPI world (rank 0 of 1)
// disagrees with the launcher environment", as it took the application's MPI for the job's).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "file_store.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"

int main() {
  const char* base = std::getenv("MCR_TEST_GIVEN_STORE");
  const char* rank_env = std::getenv("RANK");
  const char* size_env = std::getenv("WORLD_SIZE");
  if (rank_env == nullptr || size_env == nullptr) {
    std::fprintf(stderr, "app_mpi: FAIL: run torchrun-style (RANK, WORLD_SIZE)\n");
    return 2;
  }
  mcr::InitOptions init;
  if (base != nullptr) {
    // Named before MPI comes up: a singleton MPI sets a namespace of its own per process.
    init.store = std::make_shared<mcr::test::FileStore>(mcr::test::job_store_dir(base));
    init.rank = std::atoi(rank_env);
    init.size = std::atoi(size_env);
  }
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  init.timeout = std::chrono::seconds(60);
  int failures = 0;
  int rank = -1;
  {
    mcr::Communicator world = mcr::init(init);
    rank = world.rank();
    for (const auto& b : mcr::runtime_info().backends) {
      if (b.name != "mpi") continue;
      if (b.usable || b.reason.find("application initialized MPI") == std::string::npos) {
        fmt::print(stderr, "app_mpi: FAIL rank {}: mpi usable {}, '{}'\n", world.rank(), b.usable,
                   b.reason);
        ++failures;
      }
    }
    std::vector<int> v{world.rank() + 1};
    world.all_reduce(mcr::Tensor(v), mcr::ReduceOp::sum);
    const int want = world.size() * (world.size() + 1) / 2;
    if (v[0] != want) {
      fmt::print(stderr, "app_mpi: FAIL rank {}: all_reduce gave {}, want {}\n", world.rank(), v[0],
                 want);
      ++failures;
    }
  }
  mcr::finalize();
  MPI_Finalize();
  // Last: teardown (mcr's, then the application's MPI) is part of what is tested.
  if (failures == 0) fmt::print("app_mpi: rank {} OK\n", rank);
  return failures == 0 ? 0 : 1;
}
