// Ranks loop on all_reduce until an error or a deadline, and each writes what ended its loop to a
// file of its own; tests/cluster/fault_test.sh kills a rank or takes a host's link down meanwhile.
//
//   collective_loop --backend=NAME --report-dir=DIR [--seconds=S]
//
// Every rank runs all_reduce (max over 4096 i32, checked) on the world communicator over backend
// NAME, for at most S seconds (default 60). After 20 operations rank 0 creates DIR/looping, which
// the driver waits for before it strikes. A rank whose operation raises writes
//
//   rank R on HOST caught <Type> at <epoch ms> in operation N: <message>
//
// to DIR/rank-R (the file system is shared by every host of the cluster; standard output would
// travel through the launcher's daemons, over the very link a test takes down), then calls
// finalize(), appends "left finalize() after <ms> ms" and exits with status 3. A rank that reaches
// the deadline without an error writes "no error" and exits with 0.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fault/program.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace {

using Clock = std::chrono::steady_clock;

using mcr::test::arg;

const char* type_name(const std::exception& e) {
  return mcr::test::error_type_name(e);
}

long long epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend(arg(argc, argv, "--backend", ""));
  const std::string dir(arg(argc, argv, "--report-dir", ""));
  const int seconds = std::stoi(std::string(arg(argc, argv, "--seconds", "60")));
  if (backend.empty() || dir.empty() || seconds <= 0) {
    std::fprintf(stderr,
                 "usage: collective_loop --backend=NAME --report-dir=DIR [--seconds=S > 0]\n");
    return 2;
  }
  mcr::Communicator world = mcr::init();
  const int rank = world.rank();
  const int size = world.size();
  const std::string report_path = fmt::format("{}/rank-{}", dir, rank);
  std::ofstream report(report_path);
  mcr::CallOptions o;
  o.backend = backend;
  std::vector<std::int32_t> v(4096);
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  for (int i = 0; Clock::now() < deadline; ++i) {
    if (i == 20 && rank == 0) std::ofstream(dir + "/looping") << "20 operations done\n";
    for (std::size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<std::int32_t>((k + static_cast<std::size_t>(rank)) % size);
    try {
      world.all_reduce(mcr::Tensor(v), mcr::ReduceOp::max, o);
    } catch (const std::exception& e) {
      report << fmt::format("rank {} on {} caught {} at {} in operation {}: {}\n", rank,
                            host_name(), type_name(e), epoch_ms(), i, e.what())
             << std::flush;
      world = mcr::Communicator();
      const auto f0 = Clock::now();
      try {
        mcr::finalize();
      } catch (const std::exception& f) {
        report << "finalize() raised: " << f.what() << "\n";
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - f0);
      report << fmt::format("left finalize() after {} ms\n", ms.count()) << std::flush;
      return 3;
    }
    for (std::size_t k = 0; k < v.size(); ++k) {
      if (v[k] != size - 1) {
        report << fmt::format("rank {}: operation {} element {} is {}, expected {}\n", rank, i, k,
                              v[k], size - 1)
               << std::flush;
        return 1;
      }
    }
  }
  report << "no error\n" << std::flush;
  world = mcr::Communicator();
  mcr::finalize();
  return 0;
}
