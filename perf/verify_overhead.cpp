// Cost of cross-rank verification (MCR_VERIFY): a small all_reduce with verification on and off,
// on the same communicator, alternating blocks so drift affects both alike (set_verify toggles it).
// Prints the median per-call latency of each per backend, and the difference.
//
//   mpirun -np 2 bench_verify [--iters N] [--reps R] [--bytes B]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/core.h>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// One block of `iters` calls, verified or not; its time is the slowest rank's, per call, in µs.
// The barrier and the max around it are not verified, so only the timed calls differ.
double block(mcr::Communicator& comm, std::vector<float>& buf, const mcr::CallOptions& o, int iters,
             bool verify) {
  comm.set_verify(false);
  comm.barrier();
  comm.set_verify(verify);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i)
    comm.all_reduce(mcr::Tensor(buf.data(), buf.size(), mcr::DType::f32), mcr::ReduceOp::sum, o);
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
  comm.set_verify(false);
  comm.all_reduce(mcr::Tensor(&us, 1, mcr::DType::f64), mcr::ReduceOp::max);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 2000;
  int reps = 15;
  std::size_t bytes = 4;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--bytes") == 0) bytes = std::strtoull(argv[i + 1], nullptr, 10);
  }
  mcr::InitOptions init;
  init.verify = true;
  mcr::Communicator comm = mcr::init(init);
  if (comm.rank() == 0) {
    fmt::print(
        "# MCR_VERIFY cost, {} ranks, all_reduce sum fp32 {} B, {} calls per block, median "
        "of {} blocks\n",
        comm.size(), bytes, iters, reps);
    fmt::print("{:>8} {:>14} {:>14} {:>14}\n", "backend", "off us", "verified us", "added us");
  }
  std::vector<float> buf(std::max<std::size_t>(1, bytes / sizeof(float)), 1.0f);
  for (const auto& backend : comm.backends()) {
    const mcr::CallOptions o{.backend = backend};
    std::vector<double> off, on;
    for (int r = 0; r < reps + 1; ++r) {  // the first pair is warm-up
      const double a = block(comm, buf, o, iters, false);
      const double b = block(comm, buf, o, iters, true);
      if (r > 0) {
        off.push_back(a);
        on.push_back(b);
      }
    }
    const double m_off = mcr::bench::median(off), m_on = mcr::bench::median(on);
    if (comm.rank() == 0)
      fmt::print("{:>8} {:>14.2f} {:>14.2f} {:>14.2f}\n", backend, m_off, m_on, m_on - m_off);
  }
  mcr::finalize();
  return 0;
}
