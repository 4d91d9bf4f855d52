// A rank ended by a signal while finalize() gathers MCR_LOG's records (its peer has not arrived):
// it writes its own records. finalize took the log out of reach before the gather, and the crash
// hook, finding it gone, wrote nothing: the records of a rank that mpirun or Slurm ended there
// were lost.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "mcr/comm.hpp"

int main() {
  mcr::Communicator world = mcr::init();
  float x[4] = {1, 1, 1, 1};
  world.all_reduce(mcr::Tensor(x, 4, mcr::DType::f32), mcr::ReduceOp::sum);
  std::int64_t pid = ::getpid();
  std::vector<std::int64_t> pids(static_cast<std::size_t>(world.size()));
  world.all_gather(mcr::Tensor(&pid, 1, mcr::DType::i64),
                   mcr::Tensor(pids.data(), pids.size(), mcr::DType::i64));
  if (world.rank() == 1) {
    // Rank 0 is in finalize's gather by then, waiting for this rank.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::printf("killed_in_finalize: rank 1 sends SIGTERM to rank 0\n");
    std::fflush(stdout);
    if (::kill(static_cast<pid_t>(pids[0]), SIGTERM) != 0) {
      std::printf("killed_in_finalize: FAIL: kill failed\n");
    }
    std::this_thread::sleep_for(std::chrono::seconds(20));  // the launcher ends this rank
    return 0;
  }
  world = mcr::Communicator();
  mcr::finalize();
  std::printf("killed_in_finalize: FAIL: rank 0 finalized although its peer never arrived\n");
  return 1;
}
