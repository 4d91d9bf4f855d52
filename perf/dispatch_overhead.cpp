// Dispatch overhead of mcr over raw MPI: MPI_Allreduce against comm.all_reduce forced onto the MPI
// backend, same buffers, same process, alternating blocks so drift affects both alike. Prints the
// median per-call latency of each and their ratio per message size.
//
//   mpirun -np 2 bench_dispatch [--iters N] [--reps R]
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"

int main(int argc, char** argv) {
  int iters_small = 20000;
  int reps = 15;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters_small = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  }
  mcr::Communicator comm = mcr::init();
  const mcr::CallOptions on_mpi{.backend = "mpi"};
  if (comm.rank() == 0) {
    fmt::print("# mcr dispatch overhead, {} ranks, all_reduce sum fp32, median of {} blocks\n",
               comm.size(), reps);
    fmt::print("{:>10} {:>8} {:>14} {:>14} {:>8}\n", "bytes", "iters", "raw MPI us", "mcr us",
               "ratio");
  }
  for (std::size_t bytes : {std::size_t{4}, std::size_t{1024}, std::size_t{64} << 10,
                            std::size_t{1} << 20, std::size_t{4} << 20}) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> in(count, 1.0f), out(count, 0.0f);
    const int iters = std::max(10, static_cast<int>(iters_small / (1 + bytes / 4096)));
    std::vector<double> raw, via;
    for (int r = 0; r < reps + 1; ++r) {  // first block is warm-up
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }
      double t1 = MPI_Wtime();
      MPI_Barrier(MPI_COMM_WORLD);
      double t2 = MPI_Wtime();
      for (int i = 0; i < iters; ++i)
        comm.all_reduce(in, out, mcr::ReduceOp::sum, on_mpi);
      double t3 = MPI_Wtime();
      // The slowest rank defines a collective's time.
      double local[2] = {t1 - t0, t3 - t2}, global[2];
      MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (r > 0) {
        raw.push_back(global[0] / iters * 1e6);
        via.push_back(global[1] / iters * 1e6);
      }
    }
    if (out[0] != static_cast<float>(comm.size())) {
      fmt::print(stderr, "wrong result: {} != {}\n", out[0], comm.size());
      return 1;
    }
    const double mr = mcr::bench::median(raw), mv = mcr::bench::median(via);
    if (comm.rank() == 0)
      fmt::print("{:>10} {:>8} {:>14.3f} {:>14.3f} {:>8.3f}\n", bytes, iters, mr, mv, mv / mr);
  }
  mcr::finalize();
  return 0;
}
