// One rank dies with SIGKILL in the middle of a job; every other rank must get an error, not hang.
//
//   peer_kill --backend=NAME --victim=RANK [--at=N|finalize] [--form=sync|async] [--signal=S]
//
// Every rank runs 8 all_reduce operations on the world communicator over backend NAME. Before
// operation N (default 3) the victim raises SIGKILL on itself. A survivor that gets an error
// prints one line
//
//   peer_kill: rank R caught <Type> after <ms> ms in operation N: <message>
//
// (ms counted from the start of operation N), then calls finalize() and exits with status 3. A
// survivor that finishes every operation without an error prints "no error" and exits with 0: the
// driver (run_peer_kill.sh) then fails the test. With --at=finalize the victim dies after the
// last operation instead of calling finalize(), which the survivors are then in. Every survivor
// prints "peer_kill: rank R left finalize() after <ms> ms".
//
// --signal=stop freezes the victim (SIGSTOP) instead of killing it: its sockets stay open and
// silent, as when a host vanishes without a reset. A helper process kills it 15 s later, so the
// launcher sees it die once the survivors are done.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
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

// The victim's end: SIGKILL now, or SIGSTOP now and SIGKILL from a helper process later.
void die(bool freeze) {
  std::fflush(nullptr);
  if (freeze) {
    const pid_t victim = ::getpid();
    if (::fork() == 0) {
      ::sleep(15);
      ::kill(victim, SIGKILL);
      ::_exit(0);
    }
    ::raise(SIGSTOP);
  }
  ::raise(SIGKILL);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend(arg(argc, argv, "--backend", ""));
  const int victim = std::stoi(std::string(arg(argc, argv, "--victim", "-1")));
  const std::string at_arg(arg(argc, argv, "--at", "3"));
  constexpr int kOps = 8;
  const int at = at_arg == "finalize" ? kOps : std::stoi(at_arg);
  const bool async = arg(argc, argv, "--form", "sync") == "async";
  const bool freeze = arg(argc, argv, "--signal", "kill") == "stop";
  if (backend.empty() || victim < 0) {
    std::fprintf(stderr, "usage: peer_kill --backend=NAME --victim=RANK [--at=N] [--form=F]\n");
    return 2;
  }
  mcr::Communicator world = mcr::init();
  const int rank = world.rank();
  mcr::CallOptions o;
  o.backend = backend;
  std::vector<std::int32_t> v(4096, 1);
  for (int i = 0; i < kOps; ++i) {
    if (i == at && rank == victim) die(freeze);
    const auto t0 = Clock::now();
    try {
      if (async) {
        world.iall_reduce(mcr::Tensor(v), mcr::ReduceOp::max, o).wait();
      } else {
        world.all_reduce(mcr::Tensor(v), mcr::ReduceOp::max, o);
      }
    } catch (const std::exception& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
      std::printf("peer_kill: rank %d caught %s after %lld ms in operation %d: %s\n", rank,
                  type_name(e), static_cast<long long>(ms.count()), i, e.what());
      std::fflush(stdout);
      world = mcr::Communicator();
      const auto f0 = Clock::now();
      try {
        mcr::finalize();
      } catch (const std::exception& f) {
        std::printf("peer_kill: rank %d: finalize() raised: %s\n", rank, f.what());
      }
      const auto fms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - f0);
      std::printf("peer_kill: rank %d left finalize() after %lld ms\n", rank,
                  static_cast<long long>(fms.count()));
      std::fflush(stdout);
      return 3;
    }
  }
  if (at < kOps) std::printf("peer_kill: rank %d: no error\n", rank);
  std::fflush(stdout);
  if (rank == victim) die(freeze);
  world = mcr::Communicator();
  const auto f0 = Clock::now();
  mcr::finalize();
  const auto fms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - f0);
  std::printf("peer_kill: rank %d left finalize() after %lld ms\n", rank,
              static_cast<long long>(fms.count()));
  return 0;
}
