// The conformance suite: the case list of verify/conformance.hpp (every operation x dtype x
// reduce op x count x placement x root x sync/async) through every backend of the communicator,
// against references computed locally, on the world communicator and on two sub-communicators with
// strided rank lists. A backend that takes no host tensors (UnsupportedError for host memory, the
// same on every rank) runs each case on device copies of its buffers when the process has a
// device, so NCCL runs the same cases as MPI and Gloo.
//
// What runs where (to keep every multi-rank run within the CI budget on 2 cores):
//  * counts 0, 1, 7 and 1000: the full matrix, every dtype, every reduce op valid for the dtype,
//    both roots, every backend, sync and async, both in-place forms;
//  * count 2^18 + 3: for reduce, all_reduce and reduce_scatter every dtype with sum (first root
//    only); for the other operations one representative dtype per operation (rotating, so that each
//    dtype appears), every backend, sync and async, both forms.
//  MCR_TEST_FULL_MATRIX=1 (or --full-matrix=1) runs the large count for every combination.
//  MCR_TEST_MATRIX=light (or --matrix=light) keeps every operation, reduce op, root, placement and
//  sync/async form but only counts 1 and 1000 (every reduce op at 1; sum, avg and bxor at 1000)
//  plus the large count, and only f32, bf16 and i32: the multi-host runs (tests/cluster), where
//  each message crosses TCP and the dtype x count sweep adds nothing the one-host runs lack.
//
// Communicators: "world"; "even" = new_group of the even ranks (a strided list; odd ranks get an
// invalid communicator and skip); "split" = split(rank % 2, -rank), two groups ordered in reverse.
// Roots are size - 1 and 1 % size; send/recv exchanges shift by 1 and by size - 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "harness.hpp"
#include "mcr/comm/info.hpp"
#include "verify/api_driver.hpp"
#include "verify/conformance.hpp"
#include "verify/device_mirror.hpp"

namespace mcr::test {
namespace {

constexpr std::size_t kSmallCounts[] = {0, 1, 7, 1000};
constexpr std::size_t kLargeCount = (std::size_t{1} << 18) + 3;
constexpr int kMaxReportedFailures = 20;

bool full_matrix() {
  return option("full-matrix", "MCR_TEST_FULL_MATRIX", "0") == "1";
}

// ---- communicators under test ---------------------------------------------------------------

enum class Scope { world, even, split };

std::string to_string(Scope s) {
  switch (s) {
    case Scope::world:
      return "world";
    case Scope::even:
      return "even";
    case Scope::split:
      return "split";
  }
  return "?";
}

struct Scopes {
  Communicator even;
  Communicator split;
};

// Created once, by the first test that needs them. Creation is collective over the world; every
// rank runs the same tests in the same order, so every rank gets here at the same point.
std::optional<Scopes> g_scopes;

Scopes& scopes() {
  if (!g_scopes) {
    Scopes out;
    std::vector<int> evens;
    for (int r = 0; r < world().size(); r += 2)
      evens.push_back(r);
    out.even = world().new_group(evens);
    out.split = world().split(world().rank() % 2, -world().rank());
    g_scopes = std::move(out);
  }
  return *g_scopes;
}

// Releases the sub-communicators after the last test, while the runtime is still initialised.
class ReleaseScopes : public ::testing::Environment {
 public:
  void TearDown() override { g_scopes.reset(); }
};
[[maybe_unused]] const auto* const kReleaseScopes =
    ::testing::AddGlobalTestEnvironment(new ReleaseScopes);

Communicator communicator(Scope s) {
  switch (s) {
    case Scope::world:
      return world();
    case Scope::even:
      return scopes().even;
    case Scope::split:
      return scopes().split;
  }
  return {};
}

// ---- the matrix -----------------------------------------------------------------------------

MatrixOptions suite_options() {
  MatrixOptions options;
  options.counts.assign(std::begin(kSmallCounts), std::end(kSmallCounts));
  options.large_count = kLargeCount;
  options.large_count_everywhere = full_matrix();
  const std::string matrix = option("matrix", "MCR_TEST_MATRIX", "full");
  if (matrix == "light") {
    options.counts = {1, 1000};
    options.every_reduce_op_at = {1};
    options.dtypes = {DType::f32, DType::bf16, DType::i32};
  } else if (matrix != "full") {
    throw std::invalid_argument(
        fmt::format("MCR_TEST_MATRIX='{}': must be 'full' or 'light'", matrix));
  }
  return options;
}

// Outcome of a matrix: failures (capped in the log), what backends declared unsupported, and which
// (op, dtype, reduce) some backend could run.
struct Tally {
  int cases = 0;
  int device_cases = 0;  // ran on device copies of the buffers
  int failures = 0;
  std::set<std::string> unsupported;
  std::set<std::string> known_gaps;      // failed, but listed in verify/conformance.cpp
  std::map<std::string, bool> runnable;  // "op dtype reduce" -> some backend ran it

  void fail(const std::string& what) {
    if (++failures <= kMaxReportedFailures) ADD_FAILURE() << what;
  }
};

// Checks the message of an explicit request for an unsupported combination: it must name the
// backend, the operation and the dtype.
void check_unsupported_message(const OpCase& c, const std::string& message, Tally& tally) {
  const std::string op = c.op == OpType::send ? "send" : std::string(mcr::to_string(c.op));
  for (const std::string& word : {c.backend, op, std::string(mcr::to_string(c.dtype))}) {
    if (message.find(word) == std::string::npos) {
      tally.fail(fmt::format("[{}] UnsupportedError for {} does not name '{}': {}", rank_tag(),
                             describe(c), word, message));
    }
  }
}

void run_case(Communicator& comm, const std::string& scope, const OpCase& c, Tally& tally) {
  ++tally.cases;
  std::string context = fmt::format("[{} on {} rank {}/{}] {}", rank_tag(), scope, comm.rank(),
                                    comm.size(), describe(c));
  PreparedCase prepared(c, comm.rank(), comm.size());
  std::unique_ptr<DeviceMirror> mirror;
  Placement where = prepared.host();
  const std::size_t seen_before = observer().seen();
  for (;;) {
    try {
      auto works = issue(comm, prepared, where);
      for (Work& w : works) {
        w.wait();
        if (w.backend() != c.backend) {
          tally.fail(fmt::format("{}: ran on backend '{}'", context, w.backend()));
        }
      }
      break;
    } catch (const UnsupportedError& e) {
      // Host memory refused: retry once on device copies when there is a device.
      if (!mirror && device_count() > 0) {
        mirror = std::make_unique<DeviceMirror>(prepared, world().rank() % device_count());
        where = mirror->placement();
        context += " (device memory)";
        ++tally.device_cases;
        continue;
      }
      tally.unsupported.insert(fmt::format("{} {}", c.backend, combination(c)));
      check_unsupported_message(c, e.what(), tally);
      return;
    } catch (const std::exception& e) {
      if (const auto gap = known_gap(c, comm.size()); !gap.empty()) {
        tally.known_gaps.insert(fmt::format("{} {}: {}", c.backend, combination(c), gap));
      } else {
        tally.fail(fmt::format("{}: raised: {}", context, e.what()));
      }
      return;
    }
  }
  if (mirror) mirror->download();
  tally.runnable[combination(c)] = true;
  if (!c.async) {
    const OpRecord last = observer().last();
    if (observer().seen() == seen_before) {
      tally.fail(fmt::format("{}: the observer saw no completed operation", context));
    } else if (last.backend != c.backend) {
      tally.fail(fmt::format("{}: observer reports backend '{}'", context, last.backend));
    }
  }
  if (const std::string diff = prepared.verify(); !diff.empty()) {
    if (const auto gap = known_gap(c, comm.size()); !gap.empty()) {
      tally.known_gaps.insert(fmt::format("{} {}: {}", c.backend, combination(c), gap));
    } else {
      tally.fail(fmt::format("{}:\n{}", context, diff));
    }
  }
}

void report(const Tally& tally, const std::string& what) {
  if (tally.failures > kMaxReportedFailures) {
    ADD_FAILURE() << fmt::format("[{}] {}: {} more failures not shown", rank_tag(), what,
                                 tally.failures - kMaxReportedFailures);
  }
  if (world().rank() == 0) {
    std::printf("[ %s ] %d cases (%d on device memory), %zu unsupported combinations skipped\n",
                what.c_str(), tally.cases, tally.device_cases, tally.unsupported.size());
    for (const auto& u : tally.unsupported)
      std::printf("    unsupported: %s\n", u.c_str());
    for (const auto& g : tally.known_gaps)
      std::printf("    known gap: %s\n", g.c_str());
    std::fflush(stdout);
  }
}

// Runs every case of `op` on the communicator of `scope`.
void run_matrix(Scope scope, OpType op) {
  Communicator comm = communicator(scope);
  if (!comm.valid())
    GTEST_SKIP() << "this rank is not a member of the '" << to_string(scope) << "' group";
  Tally tally;
  const auto cases = conformance_cases(op, comm.size(), suite_options());
  std::set<std::string> combinations;
  for (const OpCase& c : cases)
    combinations.insert(combination(c));
  for (const std::string& backend : comm.backends()) {
    for (OpCase c : cases) {
      c.backend = backend;
      run_case(comm, to_string(scope), c, tally);
    }
  }
  for (const auto& combo : combinations) {
    if (!tally.runnable.contains(combo)) {
      ADD_FAILURE() << fmt::format("[{}] no backend of {} runs {}", rank_tag(), to_string(scope),
                                   combo);
    }
  }
  // The host libraries run every combination of the matrix in host memory: a refusal by one of
  // them would otherwise pass, covered by the other.
  for (const auto& skipped : tally.unsupported) {
    if (skipped.starts_with("mpi ") || skipped.starts_with("gloo ")) {
      ADD_FAILURE() << fmt::format("[{}] {}: refused by a host library", rank_tag(), skipped);
    }
  }
  report(tally, fmt::format("{} on {}", op == OpType::send ? "send/recv" : mcr::to_string(op),
                            to_string(scope)));
}

// Sub-communicator runs take different times on different ranks (groups differ in size, non-members
// skip); the world meets after every test so that no rank waits in the next test's first world
// operation for longer than that operation's timeout.
void meet_on_world() {
  CallOptions opts;
  opts.timeout = std::chrono::minutes(10);
  world().ibarrier(opts).wait();
}

class Ops : public ::testing::TestWithParam<Scope> {
 protected:
  void TearDown() override { meet_on_world(); }
};

TEST_P(Ops, SendRecv) {
  run_matrix(GetParam(), OpType::send);
}
TEST_P(Ops, Broadcast) {
  run_matrix(GetParam(), OpType::broadcast);
}
TEST_P(Ops, Reduce) {
  run_matrix(GetParam(), OpType::reduce);
}
TEST_P(Ops, AllReduce) {
  run_matrix(GetParam(), OpType::all_reduce);
}
TEST_P(Ops, AllGather) {
  run_matrix(GetParam(), OpType::all_gather);
}
TEST_P(Ops, AllGatherV) {
  run_matrix(GetParam(), OpType::all_gather_v);
}
TEST_P(Ops, Gather) {
  run_matrix(GetParam(), OpType::gather);
}
TEST_P(Ops, Scatter) {
  run_matrix(GetParam(), OpType::scatter);
}
TEST_P(Ops, ReduceScatter) {
  run_matrix(GetParam(), OpType::reduce_scatter);
}
TEST_P(Ops, AllToAll) {
  run_matrix(GetParam(), OpType::all_to_all);
}
TEST_P(Ops, AllToAllV) {
  run_matrix(GetParam(), OpType::all_to_all_v);
}

// Barrier: no rank may leave before the last one entered. steady_clock is CLOCK_MONOTONIC, one
// clock for every process on the machine, so entry and exit times of different ranks compare
// directly.
TEST_P(Ops, Barrier) {
  Communicator comm = communicator(GetParam());
  if (!comm.valid()) GTEST_SKIP() << "not a member of this group";
  using Clock = std::chrono::steady_clock;
  auto ns = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  for (const std::string& backend : comm.backends()) {
    for (bool async : {false, true}) {
      // The last rank arrives late, so a barrier that does not wait shows.
      if (comm.rank() == comm.size() - 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      CallOptions opts;
      opts.backend = backend;
      const auto entry = Clock::now();
      try {
        if (async) {
          Work w = comm.ibarrier(opts);
          w.wait();
          EXPECT_EQ(w.backend(), backend);
        } else {
          comm.barrier(opts);
          EXPECT_EQ(observer().last().backend, backend);
        }
      } catch (const UnsupportedError& e) {
        // A barrier has no tensor, so it runs as a host operation: a device-only backend refuses
        // it (the same on every rank).
        if (comm.rank() == 0)
          std::printf("    barrier unsupported on %s: %s\n", backend.c_str(), e.what());
        continue;
      } catch (const std::exception& e) {
        ADD_FAILURE() << fmt::format("[{}] barrier on {} ({}): raised: {}", rank_tag(), backend,
                                     async ? "async" : "sync", e.what());
        continue;
      }
      const auto exit = Clock::now();
      // max over ranks of (entry, -exit): the latest entry and the earliest exit.
      std::int64_t times[2] = {ns(entry), -ns(exit)};
      comm.all_reduce(Tensor(times, 2, DType::i64), ReduceOp::max);
      EXPECT_GE(-times[1], times[0]) << fmt::format(
          "[{}] barrier on {} ({}): a rank left {} us before the last rank entered", rank_tag(),
          backend, async ? "async" : "sync", (times[0] + times[1]) / 1000);
    }
  }
}

// In the torchrun-style environment (no MPI launcher) MPI must report itself unusable, leaving
// Gloo.
TEST(Launch, TorchrunEnvironmentRunsGlooOnly) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("RANK") == nullptr) {
    GTEST_SKIP() << "not a torchrun-style launch";
  }
  EXPECT_EQ(world().backends(), std::vector<std::string>{"gloo"});
  EXPECT_EQ(std::to_string(world().size()), std::string(std::getenv("WORLD_SIZE")));
  EXPECT_EQ(std::to_string(world().rank()), std::string(std::getenv("RANK")));
}

// Launched by mpiexec, both CPU backends are expected to be up.
TEST(Launch, MpiexecBringsUpMpiAndGloo) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) GTEST_SKIP() << "not launched by mpiexec";
  const auto b = world().backends();
  EXPECT_NE(std::find(b.begin(), b.end(), "mpi"), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), "gloo"), b.end());
  EXPECT_EQ(std::to_string(world().size()), std::string(std::getenv("OMPI_COMM_WORLD_SIZE")));
}

// Launched by srun: rank and size are Slurm's. Without an MPI plugin (no PMIx/PMI variables) the
// world forms through mcr's own store on rank 0 and only Gloo comes up; with --mpi=pmix MPI forms
// the world and both CPU backends come up.
TEST(Launch, SrunSetsRankAndSizeAndFormsTheWorld) {
  const char* procid = std::getenv("SLURM_PROCID");
  if (procid == nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
      std::getenv("RANK") != nullptr) {
    GTEST_SKIP() << "not launched by srun";
  }
  EXPECT_EQ(std::to_string(world().rank()), std::string(procid));
  EXPECT_EQ(std::to_string(world().size()), std::string(std::getenv("SLURM_NTASKS")));
  const mcr::RuntimeInfo info = mcr::runtime_info();
  EXPECT_EQ(info.launcher, "srun");
  EXPECT_EQ(info.rendezvous, "tcp store");
  const auto b = world().backends();
  if (std::getenv("PMIX_RANK") != nullptr) {
    EXPECT_EQ(info.world_exchange, "mpi");
    EXPECT_NE(std::find(b.begin(), b.end(), "mpi"), b.end());
    EXPECT_NE(std::find(b.begin(), b.end(), "gloo"), b.end());
  } else {
    EXPECT_EQ(info.world_exchange, "store");
    EXPECT_NE(std::find(b.begin(), b.end(), "gloo"), b.end());
    EXPECT_EQ(std::find(b.begin(), b.end(), "mpi"), b.end());
    const char* nodes = std::getenv("SLURM_STEP_NUM_NODES");
    if (nodes == nullptr || std::string_view(nodes) == "1") {
      EXPECT_EQ(b, std::vector<std::string>{"gloo"});
      EXPECT_EQ(info.store_host, "127.0.0.1");  // one node: loopback
    } else {
      // Several nodes: the store listens on task 0's node, named as Slurm names it (rank 0's
      // SLURMD_NODENAME, sent to every rank), and hier composes Gloo across the hosts.
      const char* mine = std::getenv("SLURMD_NODENAME");
      ASSERT_NE(mine, nullptr);
      std::vector<std::uint8_t> name(256, 0);
      std::copy_n(mine, std::min<std::size_t>(std::strlen(mine), name.size() - 1), name.begin());
      world().broadcast(name, 0);
      EXPECT_EQ(info.store_host, std::string(reinterpret_cast<const char*>(name.data())));
      EXPECT_NE(std::find(b.begin(), b.end(), "hier"), b.end());
    }
  }
}

// With every backend free to be chosen (no explicit backend), selection must send operations to
// each backend listed in MCR_TEST_EXPECT_SELECTED (e.g. "mpi,gloo", with MCR_RULES sending large
// messages to gloo and the default priority leaving small ones to mpi). all_reduce and broadcast
// run at 4 B to 4 MiB; each result is checked against its closed form and the observer says which
// backend ran it. Skipped unless MCR_TEST_EXPECT_SELECTED is set.
TEST(Launch, SelectionReachesEveryExpectedBackend) {
  const std::string expected = option("expect-selected", "MCR_TEST_EXPECT_SELECTED", "");
  if (expected.empty()) GTEST_SKIP() << "MCR_TEST_EXPECT_SELECTED is not set";
  std::set<std::string> want;
  for (std::size_t start = 0; start <= expected.size();) {
    const std::size_t comma = std::min(expected.find(',', start), expected.size());
    want.insert(expected.substr(start, comma - start));
    start = comma + 1;
  }
  Communicator comm = world();
  const int size = comm.size();
  const float rank_value = static_cast<float>(comm.rank() + 1);
  std::map<std::string, std::vector<std::string>> chosen;  // backend -> "op bytes"
  for (std::size_t count :
       {std::size_t{1}, std::size_t{1} << 10, std::size_t{1} << 18, std::size_t{1} << 20}) {
    for (OpType op : {OpType::all_reduce, OpType::broadcast}) {
      std::vector<float> v(count, rank_value);
      float want_value = 0;
      if (op == OpType::all_reduce) {
        comm.all_reduce(Tensor(v), ReduceOp::sum);
        want_value = static_cast<float>(size * (size + 1) / 2);
      } else {
        comm.broadcast(Tensor(v), size - 1);
        want_value = static_cast<float>(size);
      }
      const auto wrong =
          std::count_if(v.begin(), v.end(), [&](float x) { return x != want_value; });
      const std::string backend(observer().last().backend);
      EXPECT_EQ(wrong, 0) << fmt::format("[{}] {} of {} floats on '{}': {} elements differ from {}",
                                         rank_tag(), mcr::to_string(op), count, backend, wrong,
                                         want_value);
      chosen[backend].push_back(fmt::format("{} {} B", mcr::to_string(op), count * sizeof(float)));
    }
  }
  std::set<std::string> seen;
  for (const auto& [backend, ops] : chosen) {
    seen.insert(backend);
    if (comm.rank() == 0) {
      std::string list;
      for (const auto& o : ops)
        list += (list.empty() ? "" : ", ") + o;
      std::printf("    selected %s for: %s\n", backend.c_str(), list.c_str());
    }
  }
  EXPECT_EQ(seen, want) << rank_tag() << ": the backends selection chose differ from "
                        << "MCR_TEST_EXPECT_SELECTED='" << expected << "'";
}

// Sub-communicators map their ranks as documented.
TEST(Groups, StridedRankLists) {
  const int rank = world().rank();
  const int size = world().size();
  const Communicator& even = scopes().even;
  EXPECT_EQ(even.valid(), rank % 2 == 0);
  if (even.valid()) {
    EXPECT_EQ(even.size(), (size + 1) / 2);
    EXPECT_EQ(even.rank(), rank / 2);
    for (int r = 0; r < even.size(); ++r)
      EXPECT_EQ(even.global_rank(r), 2 * r);
  }
  const Communicator& split = scopes().split;
  ASSERT_TRUE(split.valid());
  const int members = (size - rank % 2 + 1) / 2;  // ranks with my parity
  EXPECT_EQ(split.size(), members);
  // Keys are -rank: the highest rank of each parity comes first.
  EXPECT_EQ(split.rank(), members - 1 - rank / 2);
  for (int r = 0; r < split.size(); ++r) {
    EXPECT_EQ(split.global_rank(r), rank % 2 + 2 * (members - 1 - r));
  }
  EXPECT_NE(split.id(), world().id());
}

// Messages with different tags between the same pair match by tag, not by arrival order.
TEST(PointToPoint, TagsMatchOutOfOrder) {
  Communicator comm = world();
  const int size = comm.size();
  const int dst = (comm.rank() + 1) % size;
  const int src = (comm.rank() - 1 + size) % size;
  for (const std::string& backend : comm.backends()) {
    std::int32_t sent[2] = {100 + comm.rank(), 200 + comm.rank()};
    std::int32_t got[2] = {-1, -1};
    CallOptions first{.backend = backend, .tag = 1};
    CallOptions second{.backend = backend, .tag = 2};
    try {
      Work s1 = comm.isend(Tensor(&sent[0], 1, DType::i32), dst, first);
      Work s2 = comm.isend(Tensor(&sent[1], 1, DType::i32), dst, second);
      Work r2 = comm.irecv(Tensor(&got[1], 1, DType::i32), src, second);
      Work r1 = comm.irecv(Tensor(&got[0], 1, DType::i32), src, first);
      r2.wait();
      r1.wait();
      s2.wait();
      s1.wait();
    } catch (const UnsupportedError& e) {
      // Host tensors or tags refused (NCCL has neither), before anything was sent, on every rank.
      if (comm.rank() == 0)
        std::printf("    tags unsupported on %s: %s\n", backend.c_str(), e.what());
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << fmt::format("[{}] tagged exchange on {}: raised: {}", rank_tag(), backend,
                                   e.what());
      continue;
    }
    EXPECT_EQ(got[0], 100 + src) << rank_tag() << " backend " << backend << " tag 1";
    EXPECT_EQ(got[1], 200 + src) << rank_tag() << " backend " << backend << " tag 2";
  }
}

// The two ends of a message in different forms, as MPI allows (a blocking send matched by an irecv,
// an isend by a blocking recv), with the backend left to selection: both ends must select the same
// library. The ctest entry mpi.p2p.one_end_rule runs it with a rule that names send only.
TEST(PointToPoint, BlockingAndNonblockingEndsMeet) {
  Communicator comm = world();
  const int rank = comm.rank();
  const int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (peer >= comm.size()) GTEST_SKIP() << "rank " << rank << " has no partner at this size";
  CallOptions opts;
  opts.timeout = std::chrono::seconds(20);  // a mismatch times out here, not after MCR_TIMEOUT
  for (int round = 0; round < 2; ++round) {
    // Round 0: the even rank sends blocking, the odd one receives with irecv; round 1: isend, recv.
    const bool sends = (rank % 2 == 0) == (round == 0);
    std::vector<std::int32_t> buf(1000);
    try {
      if (sends) {
        for (std::size_t i = 0; i < buf.size(); ++i)
          buf[i] = static_cast<std::int32_t>(1000 * rank + static_cast<int>(i) + round);
        if (round == 0) {
          comm.send(Tensor(buf), peer, opts);
        } else {
          comm.isend(Tensor(buf), peer, opts).wait();
        }
      } else {
        if (round == 0) {
          comm.irecv(Tensor(buf), peer, opts).wait();
        } else {
          comm.recv(Tensor(buf), peer, opts);
        }
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < buf.size(); ++i)
          wrong += buf[i] != static_cast<std::int32_t>(1000 * peer + static_cast<int>(i) + round);
        EXPECT_EQ(wrong, 0u) << rank_tag() << " round " << round;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << rank_tag() << " round " << round << ": " << e.what();
      return;
    }
  }
}

// Work::signals_completion and the completion signal, as torch's communication thread uses them:
// between polls it may sleep on Gloo's operations (a Gloo thread signals each completion), never on
// MPI's (they advance only when polled).
TEST(Completion, GlooSignalsItsOperationsMpiDoesNot) {
  Communicator comm = world();
  const auto backends = comm.backends();
  const auto has = [&](const char* b) {
    return std::find(backends.begin(), backends.end(), b) != backends.end();
  };
  std::mutex mu;
  std::condition_variable cv;
  int signals = 0;
  set_completion_signal([&] {
    {
      std::lock_guard lock(mu);
      ++signals;
    }
    cv.notify_all();
  });
  // Polls `w` until done, sleeping on the signal in between; false when no signal came in 30 s.
  const auto poll_and_sleep = [&](Work& w) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      int seen = 0;
      {
        std::lock_guard lock(mu);
        seen = signals;
      }
      if (w.test()) return true;
      EXPECT_TRUE(w.signals_completion()) << rank_tag() << " " << to_string(w.op());
      std::unique_lock lock(mu);
      if (!cv.wait_until(lock, deadline, [&] { return signals != seen; })) return false;
    }
  };
  const int n = comm.size();
  if (has("gloo")) {
    const CallOptions gloo{.backend = "gloo"};
    std::vector<float> v(1000, static_cast<float>(comm.rank() + 1));
    Work sum = comm.iall_reduce(v, ReduceOp::sum, gloo);
    EXPECT_TRUE(poll_and_sleep(sum)) << rank_tag() << " all_reduce: no completion signal";
    EXPECT_EQ(v[999], static_cast<float>(n * (n + 1) / 2)) << rank_tag();
    if (n > 1) {  // one rank sends to itself through a mailbox, which is polled
      std::vector<std::int32_t> mine(64, comm.rank()), got(64, -1);
      Work r = comm.irecv(Tensor(got), (comm.rank() + n - 1) % n, gloo);
      Work s = comm.isend(Tensor(mine), (comm.rank() + 1) % n, gloo);
      EXPECT_TRUE(poll_and_sleep(r)) << rank_tag() << " irecv: no completion signal";
      EXPECT_TRUE(poll_and_sleep(s)) << rank_tag() << " isend: no completion signal";
      EXPECT_EQ(got[63], (comm.rank() + n - 1) % n) << rank_tag();
    }
    std::lock_guard lock(mu);
    EXPECT_GE(signals, 1) << rank_tag();
  }
  if (has("mpi")) {
    std::vector<float> big(1 << 18, 1.0f);
    Work w = comm.iall_reduce(big, ReduceOp::sum, {.backend = "mpi"});
    if (!w.test()) {
      EXPECT_FALSE(w.signals_completion()) << rank_tag() << " MPI never signals";
    }
    w.wait();
    EXPECT_TRUE(w.signals_completion()) << rank_tag() << " a completed operation";
    EXPECT_EQ(big[0], static_cast<float>(n)) << rank_tag();
  }
  set_completion_signal({});
}

INSTANTIATE_TEST_SUITE_P(Scopes, Ops, ::testing::Values(Scope::world, Scope::even, Scope::split),
                         [](const ::testing::TestParamInfo<Scope>& p) {
                           return to_string(p.param);
                         });

}  // namespace
}  // namespace mcr::test
