// finalize() with operations in flight (docs/reliability.md, "Lifetimes"), at 2 ranks:
//
//   finalize_test waits --backend=B      rank 0 calls finalize() right after issuing an all_reduce
//                                        that rank 1 joins a second later: finalize() must wait for
//                                        it (not return over it) and the result must be complete.
//   finalize_test unmatched --backend=B  rank 0 leaves a receive that no rank matches and drops
//                                        its handle: finalize() must raise TimeoutError naming the
//                                        receive within the timeout (MCR_TIMEOUT), after tearing
//                                        the runtime down.
//   finalize_test after_timeout --backend=B FORM SLOW_MS
//                                        rank 1 reaches an all_reduce SLOW_MS late; rank 0's times
//                                        out, and its finalize() must not wait for rank 1 (run by
//                                        after_timeout.sh, which checks how the job ends).
//   finalize_test sent_unwaited --backend=B
//                                        rank 0 sends on B and never waits for the send, which
//                                        rank 1 receives; then a receive that no rank matches
//                                        times out on both ranks. The send completed, so
//                                        finalize() after the failure must still finalize MPI:
//                                        the job must end with status 0.
//   finalize_test group_after_timeout --backend=B
//                                        rank 0's all_reduce, which rank 1 never joins, times out
//                                        and aborts the world; both ranks then form a group of
//                                        both from it (member_group), whose all_reduce must give
//                                        the right sum on B. Rank 0 prints "[mcr-test] all 2
//                                        ranks passed" when both saw it (run by ends_job.sh).
//
// Exit status 0 when the rank saw what it must, 1 otherwise; each rank prints why.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace {

using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

int fail(int rank, const std::string& why) {
  fmt::print(stderr, "finalize_test rank {}: FAIL: {}\n", rank, why);
  return 1;
}

int waits(mcr::Communicator world, std::string_view backend) {
  const int rank = world.rank();
  std::vector<std::int32_t> v(1024, rank + 1);
  mcr::CallOptions o;
  o.backend = backend;
  if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  mcr::Work w = world.iall_reduce(mcr::Tensor(v), mcr::ReduceOp::sum, o);
  world = mcr::Communicator();
  const auto t0 = Clock::now();
  mcr::finalize();  // rank 0 has not waited: finalize() must
  const long took = ms_since(t0);
  const int expected = 3;  // 1 + 2
  for (std::int32_t x : v) {
    if (x != expected) {
      return fail(rank, fmt::format("finalize() returned after {} ms with the all_reduce "
                                    "unfinished: element {} instead of {}",
                                    took, x, expected));
    }
  }
  // Rank 0 issued a second before rank 1: its finalize() must have waited for the operation.
  if (rank == 0 && took < 500) {
    return fail(rank, fmt::format("finalize() took {} ms; it cannot have waited for rank 1", took));
  }
  if (!w.test()) return fail(rank, "the handle does not report completion after finalize()");
  fmt::print(
      "finalize_test rank {}: finalize() waited {} ms for the operation in flight; "
      "result complete\n",
      rank, took);
  return 0;
}

int unmatched(mcr::Communicator world, std::string_view backend, long timeout_ms) {
  const int rank = world.rank();
  std::vector<std::int32_t> v(16, 0);
  if (rank == 0) {
    mcr::CallOptions o;
    o.backend = backend;
    o.tag = 7;
    (void)world.irecv(mcr::Tensor(v), 1, o);  // never matched; handle dropped
  }
  world = mcr::Communicator();
  const auto t0 = Clock::now();
  try {
    mcr::finalize();
  } catch (const mcr::TimeoutError& e) {
    const long took = ms_since(t0);
    const std::string what = e.what();
    if (rank != 0) return fail(rank, fmt::format("unexpected TimeoutError: {}", what));
    // Raised by the runtime's own wait ("recv (sequence #0) on backend ... did not complete") or,
    // where the wait was gloo's own with the same timeout, by gloo ("(rank 0, recv #0): ... Timed
    // out"): either names the receive, its sequence number and the backend.
    if (e.op() != "recv" || e.sequence() != 0 || e.backend() != backend ||
        (what.find("sequence #0") == std::string::npos &&
         what.find("recv #0") == std::string::npos)) {
      return fail(rank, fmt::format("TimeoutError does not name recv on {}: {}", backend, what));
    }
    if (took > timeout_ms + 1000) {
      return fail(rank,
                  fmt::format("finalize() raised after {} ms, timeout {} ms", took, timeout_ms));
    }
    if (mcr::is_initialized()) return fail(rank, "the runtime is still up after finalize() raised");
    fmt::print("finalize_test rank 0: finalize() raised after {} ms: {}\n", took, what);
    return 0;
  } catch (const std::exception& e) {
    return fail(rank, fmt::format("finalize() raised something else: {}", e.what()));
  }
  if (rank == 0) return fail(rank, "finalize() returned over a receive that never completed");
  fmt::print("finalize_test rank {}: finalize() returned after {} ms\n", rank, ms_since(t0));
  return 0;
}

// Rank 1 is slow: it reaches the all_reduce `slow_ms` after rank 0, long after rank 0's timeout.
// Rank 0's operation times out; its finalize() must return at once (no check-in, no wait for the
// slow peer), and the job must end within the timeout, not when the slow peer arrives.
int after_timeout(mcr::Communicator world, std::string_view backend, std::string_view form,
                  long timeout_ms, long slow_ms) {
  const int rank = world.rank();
  std::vector<float> v(1024, 1.0f);
  mcr::CallOptions o;
  o.backend = backend;
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
  const auto t0 = Clock::now();
  try {
    if (form == "async") {
      world.iall_reduce(mcr::Tensor(v), mcr::ReduceOp::sum, o).wait();
    } else {
      world.all_reduce(mcr::Tensor(v), mcr::ReduceOp::sum, o);
    }
    if (rank == 0) return fail(rank, "the all_reduce completed without the slow peer");
  } catch (const std::exception& e) {
    fmt::print("finalize_test rank {}: {} after {} ms: {}\n", rank,
               rank == 0 ? "timed out" : "failed", ms_since(t0), e.what());
    if (rank == 0 && ms_since(t0) > timeout_ms + 1000) {
      return fail(rank, fmt::format("the timeout came after {} ms, timeout {} ms", ms_since(t0),
                                    timeout_ms));
    }
  }
  world = mcr::Communicator();
  const auto t1 = Clock::now();
  try {
    mcr::finalize();
  } catch (const std::exception& e) {
    return fail(rank, fmt::format("finalize() raised: {}", e.what()));
  }
  const long took = ms_since(t1);
  fmt::print("finalize_test rank {}: finalize() returned after {} ms\n", rank, took);
  std::fflush(stdout);
  // MPI_Finalize, when it is still safe, may wait for the slow peer up to the timeout; everything
  // else is immediate.
  if (rank == 0 && took > timeout_ms + 1000) {
    return fail(rank, fmt::format("finalize() took {} ms after a failure", took));
  }
  return 0;
}

// A send that completed is not an operation in flight, even though its handle was never waited:
// abandoning it at finalize() after a failure must not keep MPI from being finalized (which would
// make mpiexec end the job with a failure of its own).
int sent_unwaited(mcr::Communicator world, std::string_view backend) {
  const int rank = world.rank();
  std::vector<std::int32_t> sent(1 << 18, 42), got(1 << 18, 0),
      never(16, 0);  // 1 MiB: past the eager limit
  mcr::CallOptions o;
  o.backend = backend;
  mcr::Work send;
  if (rank == 0) {
    send = world.isend(mcr::Tensor(sent), 1, o);
  } else {
    world.recv(mcr::Tensor(got), 0, o);
    for (std::int32_t x : got) {
      if (x != 42) return fail(rank, fmt::format("received {} instead of 42", x));
    }
  }
  mcr::CallOptions unmatched = o;
  unmatched.tag = 9;
  try {
    world.irecv(mcr::Tensor(never), 1 - rank, unmatched).wait();
    return fail(rank, "a receive that no rank matches completed");
  } catch (const mcr::TimeoutError&) {  // NOLINT(bugprone-empty-catch): the failure wanted
  }
  world = mcr::Communicator();
  try {
    mcr::finalize();
  } catch (const std::exception& e) {
    return fail(rank, fmt::format("finalize() raised: {}", e.what()));
  }
  fmt::print("finalize_test rank {}: finalize() after the failure returned\n", rank);
  return 0;
}

// A timeout aborts the world, but a group formed from it afterwards works: member_group meets
// through the store and every library forms the group afresh (MPI from the world's communicator,
// with rank 0's timed-out MPI operation still abandoned on it).
int group_after_timeout(mcr::Communicator world, std::string_view backend) {
  const int rank = world.rank();
  mcr::CallOptions o;
  o.backend = backend;
  if (rank == 0) {
    std::vector<float> lonely(16, 1.0f);
    try {
      world.iall_reduce(mcr::Tensor(lonely), mcr::ReduceOp::sum, o).wait();
      return fail(rank, "an all_reduce that rank 1 never joins completed");
    } catch (const mcr::TimeoutError& e) {
      fmt::print("finalize_test rank 0: timed out as meant: {:.80}\n", e.what());
    }
  }
  const std::vector<int> both{0, 1};
  mcr::Communicator group;
  try {
    group = world.member_group(both, "after the timeout", std::chrono::seconds(30));
  } catch (const std::exception& e) {
    return fail(rank, fmt::format("member_group after the timeout raised: {}", e.what()));
  }
  std::vector<std::int32_t> v(1024, rank + 1);
  std::vector<std::int32_t> passed(1, 0);
  try {
    group.all_reduce(mcr::Tensor(v), mcr::ReduceOp::sum, o);
    bool right = true;
    for (std::int32_t x : v)
      right = right && x == 3;
    if (!right) fmt::print(stderr, "finalize_test rank {}: FAIL: a sum is not 3\n", rank);
    passed[0] = right ? 1 : 0;
    group.all_reduce(mcr::Tensor(passed), mcr::ReduceOp::sum, o);
  } catch (const std::exception& e) {
    return fail(rank, fmt::format("the new group's all_reduce raised: {}", e.what()));
  }
  if (rank == 0 && passed[0] == 2) fmt::print("[mcr-test] all 2 ranks passed\n");
  std::fflush(stdout);
  group = mcr::Communicator();
  world = mcr::Communicator();
  try {
    mcr::finalize();
  } catch (const std::exception& e) {
    return fail(rank, fmt::format("finalize() raised: {}", e.what()));
  }
  return passed[0] == 2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || !std::string_view(argv[2]).starts_with("--backend=")) {
    std::fprintf(
        stderr,
        "usage: finalize_test waits|unmatched|sent_unwaited|group_after_timeout --backend=NAME\n"
        "       finalize_test after_timeout --backend=NAME [sync|async [SLOW_MS]]\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  const std::string_view backend = std::string_view(argv[2]).substr(10);
  mcr::Communicator world;
  try {
    world = mcr::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finalize_test: init failed: %s\n", e.what());
    return 1;
  }
  if (world.size() != 2) return fail(world.rank(), "needs exactly 2 ranks");
  const long timeout_ms = static_cast<long>(world.timeout().count());
  if (mode == "waits") return waits(std::move(world), backend);
  if (mode == "unmatched") return unmatched(std::move(world), backend, timeout_ms);
  if (mode == "sent_unwaited") return sent_unwaited(std::move(world), backend);
  if (mode == "group_after_timeout") return group_after_timeout(std::move(world), backend);
  if (mode == "after_timeout") {
    const std::string_view form = argc > 3 ? std::string_view(argv[3]) : "async";
    const long slow_ms = argc > 4 ? std::stol(argv[4]) : 8000;
    return after_timeout(std::move(world), backend, form, timeout_ms, slow_ms);
  }
  std::fprintf(stderr, "finalize_test: unknown mode '%s'\n", argv[1]);
  return 2;
}
