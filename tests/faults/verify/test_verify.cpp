// Cross-rank verification (run with MCR_VERIFY=1): ranks that disagree on a field of a collective
// must all raise MismatchError naming the operation, the field and the ranks on each side, before
// anything starts, so that the communicator stays usable; a correct run must still give correct
// results. Rank 0 is the odd one out in every case; at 3 ranks, ranks 1 and 2 agree with each
// other.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "mcr/comm/flight_recorder.hpp"
#include "mcr/comm/info.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Each case runs on a communicator of its own.
Communicator fresh() {
  return world().split(0, world().rank());
}

bool has_backend(const Communicator& c, std::string_view name) {
  const auto b = c.backends();
  return std::find(b.begin(), b.end(), name) != b.end();
}

// A backend mcr knows that `c` cannot select (empty where every one is usable).
std::string missing_backend(const Communicator& c) {
  std::string missing;
  for (const auto& name : backend_names()) {
    if (!has_backend(c, name)) missing = name;
  }
  return missing;
}

// How the message lists the ranks other than 0: "1" or "1, 2".
std::string others(const Communicator& c) {
  std::vector<int> r(static_cast<std::size_t>(c.size() - 1));
  std::iota(r.begin(), r.end(), 1);
  return fmt::format("{}", fmt::join(r, ", "));
}

// Runs `call`, which must raise MismatchError whose message contains every one of `words`, well
// within the timeout (rank 0 prints how long it took: docs/reliability.md quotes it).
template <class F>
void expect_mismatch(F&& call, const std::vector<std::string>& words) {
  const auto t0 = Clock::now();
  try {
    call();
  } catch (const MismatchError& e) {
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
    EXPECT_LT(us, 5'000'000) << rank_tag();
    if (world().rank() == 0)
      fmt::print("[verify] {}: MismatchError after {} us: {}\n",
                 ::testing::UnitTest::GetInstance()->current_test_info()->name(), us, e.what());
    const std::string m = e.what();
    for (const auto& w : words) {
      EXPECT_NE(m.find(w), std::string::npos)
          << fmt::format("[{}] the message does not contain '{}': {}", rank_tag(), w, m);
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << fmt::format("[{}] wrong exception type: {}", rank_tag(), e.what());
    return;
  }
  ADD_FAILURE() << fmt::format("[{}] no MismatchError", rank_tag());
}

// After a mismatch the communicator must still work and give the right result.
void expect_usable(Communicator& c) {
  std::int32_t v = c.rank() + 1;
  c.all_reduce(Tensor(&v, 1, DType::i32), ReduceOp::sum);
  EXPECT_EQ(v, c.size() * (c.size() + 1) / 2) << rank_tag();
}

TEST(Verify, IsOn) {
  ASSERT_TRUE(world().verifying()) << "run with MCR_VERIFY=1";
}

TEST(Verify, DtypeF32AgainstI32) {
  Communicator c = fresh();
  std::vector<std::uint32_t> buf(4, 1);
  const DType t = c.rank() == 0 ? DType::f32 : DType::i32;
  expect_mismatch(
      [&] { c.all_reduce(Tensor(buf.data(), 4, t), ReduceOp::sum); },
      {"all_reduce #", "dtype differs: ranks 0 have fp32, ranks " + others(c) + " have i32"});
  expect_usable(c);
}

TEST(Verify, DtypeF32AgainstF64) {
  Communicator c = fresh();
  std::vector<double> buf(4, 1.0);
  const DType t = c.rank() == 0 ? DType::f32 : DType::f64;
  expect_mismatch([&] { c.all_reduce(Tensor(buf.data(), 4, t), ReduceOp::sum); },
                  {"dtype differs: ranks 0 have fp32, ranks " + others(c) + " have fp64"});
  expect_usable(c);
}

// Unverified, MPI truncates on one rank and corrupts silently on the other, and Gloo ends the job.
TEST(Verify, CountOnEveryBackend) {
  Communicator c = fresh();
  for (const auto& backend : c.backends()) {
    CallOptions o;
    o.backend = backend;
    const std::size_t n = c.rank() == 0 ? 4 : 5;
    std::vector<float> buf(n, 1.0f);
    expect_mismatch(
        [&] { c.all_reduce(Tensor(buf.data(), n, DType::f32), ReduceOp::sum, o); },
        {"all_reduce", "count differs: ranks 0 have 4, ranks " + others(c) + " have 5"});
  }
  expect_usable(c);
}

TEST(Verify, Operation) {
  Communicator c = fresh();
  std::vector<float> buf(4, 1.0f);
  const Tensor t(buf.data(), 4, DType::f32);
  expect_mismatch(
      [&] {
        if (c.rank() == 0)
          c.all_reduce(t, ReduceOp::sum);
        else
          c.broadcast(t, 0);
      },
      {"operation differs: ranks 0 call all_reduce, ranks " + others(c) + " call broadcast"});
  expect_usable(c);
}

TEST(Verify, Root) {
  Communicator c = fresh();
  std::vector<float> buf(4, 1.0f);
  expect_mismatch([&] { c.broadcast(Tensor(buf.data(), 4, DType::f32), c.rank() == 0 ? 0 : 1); },
                  {"broadcast #", "root differs: ranks 0 have 0, ranks " + others(c) + " have 1"});
  std::vector<float> out(4);
  expect_mismatch(
      [&] {
        c.reduce(Tensor(buf.data(), 4, DType::f32), Tensor(out.data(), 4, DType::f32),
                 ReduceOp::sum, c.rank() == 0 ? 0 : 1);
      },
      {"reduce #", "root differs"});
  expect_usable(c);
}

TEST(Verify, ReduceOp) {
  Communicator c = fresh();
  std::vector<float> buf(4, 1.0f);
  const ReduceOp op = c.rank() == 0 ? ReduceOp::sum : ReduceOp::max;
  expect_mismatch([&] { c.all_reduce(Tensor(buf.data(), 4, DType::f32), op); },
                  {"reduce op differs: ranks 0 have sum, ranks " + others(c) + " have max"});
  expect_usable(c);
}

TEST(Verify, Backend) {
  Communicator c = fresh();
  if (!has_backend(c, "mpi") || !has_backend(c, "gloo")) GTEST_SKIP() << "needs mpi and gloo";
  std::vector<float> buf(4, 1.0f);
  CallOptions o;
  o.backend = c.rank() == 0 ? "mpi" : "gloo";
  expect_mismatch([&] { c.all_reduce(Tensor(buf.data(), 4, DType::f32), ReduceOp::sum, o); },
                  {"backend differs: ranks 0 have 'mpi', ranks " + others(c) + " have 'gloo'"});
  expect_usable(c);
}

// A backend that rank 0 cannot select (known, but not in this communicator) is not an error of
// rank 0 alone: every rank reports that the backend differs.
TEST(Verify, SelectionFailsOnOneRank) {
  Communicator c = fresh();
  const std::string missing = missing_backend(c);
  if (missing.empty()) GTEST_SKIP() << "every known backend is usable here";
  std::vector<float> buf(4, 1.0f);
  CallOptions o;
  if (c.rank() == 0) o.backend = missing;
  std::vector<std::string> words = {
      "backend differs: ranks 0 have no backend (selection failed there), ranks " + others(c) +
      " have '"};
  // Rank 0 also says why its selection failed (its peers know only that it did).
  if (c.rank() == 0) words.push_back("; on this rank: ");
  expect_mismatch([&] { c.all_reduce(Tensor(buf.data(), 4, DType::f32), ReduceOp::sum, o); },
                  words);
  expect_usable(c);
}

// Selection failing on every rank is each rank's own error; the flight record says the operation
// failed (it said "completed", though nothing had started).
TEST(Verify, SelectionFailsOnEveryRank) {
  Communicator c = fresh();
  const std::string missing = missing_backend(c);
  if (missing.empty()) GTEST_SKIP() << "every known backend is usable here";
  std::vector<float> buf(4, 1.0f);
  CallOptions o;
  o.backend = missing;
  try {
    c.all_reduce(Tensor(buf.data(), 4, DType::f32), ReduceOp::sum, o);
    ADD_FAILURE() << rank_tag() << ": forcing '" << missing << "' must fail";
  } catch (const MismatchError& e) {
    ADD_FAILURE() << rank_tag() << ": every rank failed alike, not a mismatch: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const auto path = (std::filesystem::temp_directory_path() /
                     fmt::format("mcr-verify-{}-rank{}.json", ::getpid(), c.rank()))
                        .string();
  dump_flight_record(path);
  std::ifstream in(path);
  const auto record = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  bool found = false;
  for (const auto& comm : record.at("communicators")) {
    if (comm.at("group_id").get<std::uint64_t>() != c.id()) continue;
    for (const auto& op : comm.at("ops")) {
      found = true;
      EXPECT_EQ(op.at("op"), "all_reduce") << rank_tag();
      EXPECT_EQ(op.at("state"), "failed") << rank_tag() << ": " << op.dump();
    }
  }
  EXPECT_TRUE(found) << rank_tag() << ": no record of communicator " << c.id();
  expect_usable(c);
}

TEST(Verify, SyncAgainstAsync) {
  Communicator c = fresh();
  std::vector<float> buf(4, 1.0f);
  const Tensor t(buf.data(), 4, DType::f32);
  expect_mismatch(
      [&] {
        if (c.rank() == 0)
          c.all_reduce(t, ReduceOp::sum);
        else
          c.iall_reduce(t, ReduceOp::sum).wait();
      },
      {"form differs: ranks 0 have sync, ranks " + others(c) + " have async"});
  expect_usable(c);
}

// MPI requires an all_reduce in place on every rank or on none, and mcr's choice of libnbc's
// algorithm follows the place (docs/mpi-backend.md).
TEST(Verify, AllReduceInPlaceAgainstOutOfPlace) {
  Communicator c = fresh();
  std::vector<float> in(4, 1.0f), out(4, 0.0f);
  expect_mismatch(
      [&] {
        if (c.rank() == 0)
          c.all_reduce(Tensor(in.data(), 4, DType::f32), ReduceOp::sum);
        else
          c.all_reduce(Tensor(in.data(), 4, DType::f32), Tensor(out.data(), 4, DType::f32),
                       ReduceOp::sum);
      },
      {"place differs: ranks 0 have in place, ranks " + others(c) + " have out of place"});
  expect_usable(c);
}

// An all_reduce of no elements has no place: a rank whose empty buffers are null (an empty
// std::vector) and one whose are not (a cleared one keeps its storage) or are one buffer must not
// differ. Each form is the first call of its kind, so verification compares it.
TEST(Verify, ZeroCountAllReduceHasNoPlace) {
  Communicator c = fresh();
  std::vector<float> in, out;
  in.reserve(4);
  out.reserve(4);
  const Tensor empty_null(static_cast<float*>(nullptr), 0, DType::f32);
  const Tensor empty_in(in.data(), 0, DType::f32), empty_out(out.data(), 0, DType::f32);
  // Rank 0 null, rank 1 two storages, rank 2 (at 3 ranks) one storage for both.
  const Tensor& mine_in = c.rank() == 0 ? empty_null : empty_in;
  const Tensor& mine_out = c.rank() == 0 ? empty_null : c.rank() == 1 ? empty_out : empty_in;
  c.all_reduce(mine_in, mine_out, ReduceOp::sum);
  c.iall_reduce(mine_in, mine_out, ReduceOp::sum).wait();
  expect_usable(c);
}

// Rank 0 issues a collective its peers do not (with verification paused, as a rank that skipped
// the check would): the next verified collective reports the index. The peers then issue the
// matching one, so the communicator comes back in step.
TEST(Verify, SkippedCollective) {
  Communicator c = fresh();
  Work extra;
  if (c.rank() == 0) {
    c.set_verify(false);
    extra = c.ibarrier();
    c.set_verify(true);
  }
  std::vector<float> buf(4, 1.0f);
  expect_mismatch([&] { c.all_reduce(Tensor(buf.data(), 4, DType::f32), ReduceOp::sum); },
                  {"collective index differs: ranks 0 have #1", "ranks " + others(c) + " have #0",
                   "a rank issued a collective its peers did not"});
  if (c.rank() != 0) {
    c.set_verify(false);
    extra = c.ibarrier();
    c.set_verify(true);
  }
  extra.wait();
  expect_usable(c);
}

TEST(Verify, AllGatherVCounts) {
  Communicator c = fresh();
  std::vector<std::size_t> counts(static_cast<std::size_t>(c.size()), 2);
  if (c.rank() == 0) counts[1] = 3;
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::vector<float> in(counts[static_cast<std::size_t>(c.rank())], 1.0f), out(total);
  expect_mismatch(
      [&] {
        c.all_gather_v(Tensor(in.data(), in.size(), DType::f32),
                       Tensor(out.data(), out.size(), DType::f32), counts);
      },
      {"all_gather_v #", "counts differ: counts[1] (rank 1's block): ranks 0 have 3",
       "ranks " + others(c) + " have 2"});
  expect_usable(c);
}

TEST(Verify, AllToAllVCounts) {
  Communicator c = fresh();
  const auto n = static_cast<std::size_t>(c.size());
  std::vector<std::size_t> send(n, 1), recv(n, 1);
  if (c.rank() == 0) recv[1] = 2;  // rank 1 sends rank 0 one element
  std::vector<float> in(n, 1.0f), out(std::accumulate(recv.begin(), recv.end(), std::size_t{0}));
  expect_mismatch(
      [&] {
        c.all_to_all_v(Tensor(in.data(), n, DType::f32), send,
                       Tensor(out.data(), out.size(), DType::f32), recv);
      },
      {"all_to_all_v #", "counts differ: rank 1 sends 1 to rank 0, which expects 2"});
  expect_usable(c);
}

// all_to_all_v counts past MPI's int on MPI: only the ranks that hold such an entry (here the
// sender and the receiver of one count of 2^32 + 5) would see it in the backend, and a third rank
// would enter MPI_Alltoallv and wait there for them. With every rank's counts exchanged, every
// rank raises UnsupportedError, naming the entry. The buffers are reserved, never touched.
TEST(Verify, AllToAllVCountPastTheBackendsLimit) {
  Communicator c = fresh();
  if (!has_backend(c, "mpi")) GTEST_SKIP() << "no MPI backend";
  const auto n = static_cast<std::size_t>(c.size());
  const auto me = static_cast<std::size_t>(c.rank());
  const std::size_t big = (std::size_t{1} << 32) + 5;
  std::vector<std::size_t> send(n, 1), recv(n, 1);
  if (me == 0) send[1] = big;
  if (me == 1) recv[0] = big;
  const auto total = [](const std::vector<std::size_t>& v) {
    return std::accumulate(v.begin(), v.end(), std::size_t{0});
  };
  Reserved in(total(send)), out(total(recv));
  ASSERT_NE(in.data(), nullptr);
  ASSERT_NE(out.data(), nullptr);
  try {
    c.all_to_all_v(Tensor(in.data(), total(send), DType::u8), send,
                   Tensor(out.data(), total(recv), DType::u8), recv, CallOptions{.backend = "mpi"});
    ADD_FAILURE() << rank_tag() << ": counts past MPI's limit did not raise";
  } catch (const UnsupportedError& e) {
    const std::string m = e.what();
    for (const std::string& w :
         {std::string("all_to_all_v #"), fmt::format("rank 0's send_counts[1] = {}", big),
          std::string("exceeds backend 'mpi''s limit of 2147483647")}) {
      EXPECT_NE(m.find(w), std::string::npos) << rank_tag() << ": no '" << w << "' in: " << m;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << rank_tag() << ": wrong exception type: " << e.what();
  }
  expect_usable(c);
}

// A correct run under verification: every op, both forms, every backend, right results.
TEST(Verify, CorrectRunIsCorrect) {
  Communicator c = fresh();
  const int n = c.size();
  const int me = c.rank();
  for (const auto& backend : c.backends()) {
    SCOPED_TRACE(backend);
    CallOptions o;
    o.backend = backend;
    std::vector<std::int32_t> v(5, me + 1);
    c.all_reduce(Tensor(v.data(), v.size(), DType::i32), ReduceOp::sum, o);
    EXPECT_EQ(v, std::vector<std::int32_t>(5, n * (n + 1) / 2)) << rank_tag();

    std::vector<std::int32_t> b(3, me == n - 1 ? 42 : 0);
    c.ibroadcast(Tensor(b.data(), b.size(), DType::i32), n - 1, o).wait();
    EXPECT_EQ(b, std::vector<std::int32_t>(3, 42)) << rank_tag();

    std::vector<std::size_t> counts(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      counts[static_cast<std::size_t>(r)] = static_cast<std::size_t>(r + 1);
    std::vector<std::int32_t> mine(static_cast<std::size_t>(me + 1), me);
    std::vector<std::int32_t> all(static_cast<std::size_t>(n * (n + 1) / 2), -1);
    c.all_gather_v(Tensor(mine.data(), mine.size(), DType::i32),
                   Tensor(all.data(), all.size(), DType::i32), counts, o);
    std::vector<std::int32_t> expected;
    for (int r = 0; r < n; ++r)
      expected.insert(expected.end(), static_cast<std::size_t>(r + 1), r);
    EXPECT_EQ(all, expected) << rank_tag();

    // all_to_all_v: rank i sends i + 1 elements to every rank.
    std::vector<std::size_t> send(static_cast<std::size_t>(n), static_cast<std::size_t>(me + 1));
    std::vector<std::size_t> recv(counts);
    std::vector<std::int32_t> in(static_cast<std::size_t>(n * (me + 1)), me);
    std::vector<std::int32_t> out(all.size(), -1);
    c.all_to_all_v(Tensor(in.data(), in.size(), DType::i32), send,
                   Tensor(out.data(), out.size(), DType::i32), recv, o);
    EXPECT_EQ(out, expected) << rank_tag();

    c.barrier(o);
  }
  // Point-to-point is not verified (it is pairwise) and still works: a ring.
  std::int32_t token = me, got = -1;
  Work s = c.isend(Tensor(&token, 1, DType::i32), (me + 1) % n);
  c.recv(Tensor(&got, 1, DType::i32), (me + n - 1) % n);
  s.wait();
  EXPECT_EQ(got, (me + n - 1) % n) << rank_tag();
  expect_usable(c);
}

// A rank that never reaches the exchange (here: verification paused there) makes the others time
// out in it, within their timeout, instead of hanging; the communicator is then aborted.
TEST(Verify, AbsentPeerTimesOut) {
  Communicator c = fresh();
  CallOptions o;
  o.timeout = 2s;
  std::vector<float> buf(4, 1.0f);
  const Tensor t(buf.data(), 4, DType::f32);
  const auto t0 = Clock::now();
  try {
    if (c.rank() == 0) {
      c.all_reduce(t, ReduceOp::sum, o);
    } else {
      c.set_verify(false);
      c.iall_reduce(t, ReduceOp::sum, o).wait();
    }
    ADD_FAILURE() << rank_tag() << ": no TimeoutError";
  } catch (const TimeoutError& e) {
    if (c.rank() == 0) {
      EXPECT_NE(std::string(e.what()).find("not every rank reached the cross-rank verification"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_LT(Clock::now() - t0, 6s) << rank_tag();
  // Aborted: later calls fail fast.
  EXPECT_THROW(c.barrier(), Error) << rank_tag();
}

}  // namespace
}  // namespace mcr::test
