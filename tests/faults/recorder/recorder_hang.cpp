// A rank that stops calling: ranks 0..n-2 enter a synchronous MPI all_reduce (sequence #3) that
// the last rank never joins. The watchdog of each waiting rank must end the job naming its rank
// and the laggard, after writing its flight record and MCR_LOG output; check_hang.cmake then runs
// `mcr doctor` on the records.
#include <chrono>
#include <thread>

#include "mcr/comm.hpp"

int main() {
  mcr::Communicator world = mcr::init();
  float x[4] = {1, 1, 1, 1};
  const mcr::CallOptions mpi{.backend = "mpi"};
  for (int i = 0; i < 3; ++i)
    world.all_reduce(mcr::Tensor(x, 4, mcr::DType::f32), mcr::ReduceOp::sum, mpi);
  if (world.rank() == world.size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // stops calling; ended with the job
  } else {
    world.all_reduce(mcr::Tensor(x, 4, mcr::DType::f32), mcr::ReduceOp::sum, mpi);
  }
  mcr::finalize();
  return 1;  // never reached in a correct run
}
