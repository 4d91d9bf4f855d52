// init(), finalize(), then init() again in a process started alone (no launcher). mcr brought MPI
// up the first time and finalized it; MPI cannot be initialized twice, so the second runtime forms
// its world of one without MPI (the MPI backend is listed unusable, saying why) and works. Before,
// the second init() called MPI after MPI_Finalize, and Open MPI ended the process. A runtime after
// one that failed is finalized as a healthy one.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

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

// What `f` writes to standard error (the runtime's messages), which is passed on as well.
template <class F>
std::string stderr_of(F&& f) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE* capture = std::tmpfile();
  if (saved < 0 || capture == nullptr) {
    check(false, "standard error could not be captured");
    f();
    return {};
  }
  ::dup2(::fileno(capture), 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  for (int c = std::fgetc(capture); c != EOF; c = std::fgetc(capture))
    text.push_back(static_cast<char>(c));
  std::fclose(capture);
  std::fputs(text.c_str(), stderr);
  return text;
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
  // A communicator that finalize() abandoned after a failure forms no group once a new runtime is
  // up: it raises, instead of calling the libraries it aborted (MPI may be finalized by then).
  // (One aborted by a timeout alone still may: member_group.)
  mcr::Communicator old;
  {
    mcr::Communicator world = mcr::init();
    std::vector<int> never{0};
    mcr::CallOptions o;
    o.timeout = std::chrono::milliseconds(200);
    try {
      world.irecv(mcr::Tensor(never), 0, o).wait();
      check(false, "a receive that nothing matches completed");
    } catch (const mcr::TimeoutError&) {  // NOLINT(bugprone-empty-catch): the failure wanted
    }
    old = world;
  }
  mcr::finalize();  // after the failure: abandons `old`
  {
    mcr::Communicator world = mcr::init();
    all_reduce_works(world, 2);
    const std::vector<int> me{0};
    try {
      (void)old.member_group(me, "after finalize", std::chrono::seconds(5));
      check(false, "an abandoned communicator formed a group");
    } catch (const mcr::Error& e) {
      check(std::string(e.what()).find("aborted") != std::string::npos,
            fmt::format("member_group of an abandoned communicator raised '{}'", e.what()));
    }
  }
  // The failure was the runtime before this one's: this finalize() takes the normal path (it took
  // the failure path, abandoning this healthy runtime's communicators under its peers).
  const std::string said = stderr_of([] { mcr::finalize(); });
  check(said.find("after a failure") == std::string::npos,
        fmt::format("a healthy runtime after a failed one was finalized as failed: {}", said));
  if (failures == 0) fmt::print("reinit: OK\n");
  return failures == 0 ? 0 : 1;
}
