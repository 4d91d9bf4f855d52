// Cost of the communication log on the hot path: comm.all_reduce of a small message with no
// observer against the same calls with a CommLog attached (what MCR_LOG=summary|trace attaches),
// in one process on the same buffers. Blocks alternate, and so does which of the two goes first,
// so drift and order affect both alike. Prints the median per-call latency of each, the median of
// the per-block ratios (log on / log off) with its 95% interval, and the added time per call.
//
//   mpirun -np 2 bench_log_overhead [--iters N] [--reps R] [--bytes B]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/core.h>

#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/comm_log.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Mean seconds per call of `iters` all_reduce calls, the slowest rank's. The log (when given) is
// attached only around the timed calls, so the reduction of the timings is not recorded.
double timed_block(mcr::Communicator& comm, const std::shared_ptr<mcr::CommLog>& log, int iters,
                   std::vector<float>& in, std::vector<float>& out) {
  comm.barrier();
  if (log) comm.set_observer(log);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i)
    comm.all_reduce(in, out, mcr::ReduceOp::sum);
  const auto t1 = Clock::now();
  if (log) comm.set_observer(nullptr);
  const double mine = std::chrono::duration<double>(t1 - t0).count() / iters;
  return mcr::bench::reduce_across(comm, {mine}, mcr::bench::TimeReduce::max)[0];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20000;
  int reps = 41;
  std::size_t bytes = 4;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--bytes") == 0)
      bytes = std::max<std::size_t>(4, std::strtoull(argv[i + 1], nullptr, 10));
  }
  mcr::Communicator comm = mcr::init();
  const std::size_t count = bytes / sizeof(float);
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  auto log = std::make_shared<mcr::CommLog>();
  timed_block(comm, nullptr, iters, in, out);  // warm-up of both
  timed_block(comm, log, iters, in, out);
  log->clear();
  std::vector<double> off, on;
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      off.push_back(timed_block(comm, nullptr, iters, in, out));
      on.push_back(timed_block(comm, log, iters, in, out));
    } else {
      on.push_back(timed_block(comm, log, iters, in, out));
      off.push_back(timed_block(comm, nullptr, iters, in, out));
    }
  }
  const auto expected_records = static_cast<std::size_t>(reps) * static_cast<std::size_t>(iters);
  if (out[0] != static_cast<float>(comm.size()) ||
      log->size() + log->dropped() != expected_records) {
    fmt::print(stderr, "rank {}: wrong result ({} != {}) or {} records for {} calls\n", comm.rank(),
               out[0], comm.size(), log->size() + log->dropped(), expected_records);
    return 1;
  }
  if (comm.rank() == 0) {
    const auto ratio = mcr::bench::paired_ratio(on, off);
    const double m_off = mcr::bench::median(off), m_on = mcr::bench::median(on);
    fmt::print(
        "# mcr log overhead, {} ranks, all_reduce sum fp32 {} B on {}, {} blocks of {} calls "
        "each\n",
        comm.size(), count * sizeof(float),
        comm.explain(mcr::OpType::all_reduce, mcr::DType::f32, count * sizeof(float)).backend, reps,
        iters);
    fmt::print("{:>12} {:>12} {:>10} {:>17} {:>10} {:>10}\n", "off us", "on us", "ratio", "ci95",
               "added ns", "min ratio");
    std::vector<double> each;
    for (std::size_t i = 0; i < on.size(); ++i)
      each.push_back(on[i] / off[i]);
    fmt::print("{:>12.4f} {:>12.4f} {:>10.4f} {:>17} {:>10.1f} {:>10.4f}\n", m_off * 1e6,
               m_on * 1e6, ratio.median, fmt::format("[{:.4f},{:.4f}]", ratio.low, ratio.high),
               (m_on - m_off) * 1e9, *std::min_element(each.begin(), each.end()));
  }
  mcr::finalize();
  return 0;
}
