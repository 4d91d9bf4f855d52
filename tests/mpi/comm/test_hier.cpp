// The composed backend `hier` across ranks: every op it composes, on every dtype and reduce op,
// sync and async, checked against independently computed results; what it declines and why.
//
// On one machine the hosts are simulated (MCR_HIER=simulate_ranks_per_host=N: consecutive blocks
// of N ranks stand for hosts); on the namespace cluster (tests/cluster/hier.cmake) they are real.
// --expect (MCR_TEST_HIER_EXPECT) says what the launch should give: "composes" (uniform hosts with
// several ranks each), or the reason hier is unusable ("one host", "different numbers").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>

#include "harness.hpp"
#include "verify/api_driver.hpp"
#include "verify/conformance.hpp"

namespace mcr::test {
namespace {

bool has_hier(const Communicator& c) {
  const auto b = c.backends();
  return std::find(b.begin(), b.end(), "hier") != b.end();
}

std::string expectation() {
  return option("expect", "MCR_TEST_HIER_EXPECT", "composes");
}

const std::vector<OpType>& composed_ops() {
  static const std::vector<OpType> ops{OpType::all_reduce, OpType::reduce_scatter,
                                       OpType::all_gather, OpType::broadcast, OpType::reduce};
  return ops;
}

// Runs every conformance case of `op` through hier on `comm`; returns the number of cases run.
int run_cases(Communicator& comm, OpType op) {
  MatrixOptions options;
  options.counts = {0, 1, 7, 1000};
  options.every_reduce_op_at = {7};
  int failures = 0, cases = 0;
  for (OpCase c : conformance_cases(op, comm.size(), options)) {
    c.backend = "hier";
    PreparedCase prepared(c, comm.rank(), comm.size());
    try {
      for (Work& w : issue(comm, prepared, prepared.host())) {
        w.wait();
        EXPECT_EQ(w.backend(), "hier") << describe(c);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << fmt::format("[{}] {}: raised: {}", rank_tag(), describe(c), e.what());
      if (++failures > 10) break;
      continue;
    }
    ++cases;
    if (const std::string diff = prepared.verify(); !diff.empty()) {
      ADD_FAILURE() << fmt::format("[{}] {}:\n{}", rank_tag(), describe(c), diff);
      if (++failures > 10) break;
    }
  }
  return cases;
}

class Composed : public ::testing::TestWithParam<OpType> {
 protected:
  void SetUp() override {
    if (expectation() != "composes") GTEST_SKIP() << "this launch does not compose";
  }
};

TEST_P(Composed, EveryDtypeSyncAndAsync) {
  ASSERT_TRUE(has_hier(world())) << "hier is not among the world's backends";
  const int cases = run_cases(world(), GetParam());
  EXPECT_GT(cases, 0);
  if (world().rank() == 0) std::printf("[ %s ] %d cases\n", to_string(GetParam()).data(), cases);
}

INSTANTIATE_TEST_SUITE_P(Hier, Composed, ::testing::ValuesIn(composed_ops()),
                         [](const auto& p) { return std::string(to_string(p.param)); });

// Ops hier does not compose are declined with the reason, so that selection falls through.
TEST(Hier, DeclinesWhatItDoesNotCompose) {
  if (!has_hier(world())) GTEST_SKIP() << "hier is not up here";
  const Selection s =
      world().explain(OpType::all_to_all, DType::f32, 4096, ReduceOp::sum, Device::cpu());
  EXPECT_NE(s.backend, "hier");
  std::vector<float> in(static_cast<std::size_t>(world().size()) * 4, 1.0f), out(in.size());
  CallOptions opts;
  opts.backend = "hier";
  try {
    world().all_to_all(in, out, opts);
    ADD_FAILURE() << "all_to_all on hier did not raise";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("hier composes all_reduce"), std::string::npos)
        << e.what();
  }
}

// Selectable like any other backend: the launch's rule (MCR_RULES=reduce_scatter:64K-=hier)
// sends large reduce_scatters to it, explain() says so, and default priority never prefers it.
TEST(Hier, RulesAndExplainSeeIt) {
  if (!has_hier(world())) GTEST_SKIP() << "hier is not up here";
  const char* rules = std::getenv("MCR_RULES");
  if (rules == nullptr || std::string(rules) != "reduce_scatter:64K-=hier") {
    GTEST_SKIP() << "launched without MCR_RULES=reduce_scatter:64K-=hier";
  }
  const Selection small =
      world().explain(OpType::reduce_scatter, DType::f32, 1024, ReduceOp::sum, Device::cpu());
  EXPECT_NE(small.backend, "hier") << "default priority must prefer the flat backends";
  const Selection big =
      world().explain(OpType::reduce_scatter, DType::f32, 1 << 20, ReduceOp::sum, Device::cpu());
  EXPECT_EQ(big.backend, "hier");
  EXPECT_EQ(big.source, "rule");
  const auto share = static_cast<std::size_t>(1 << 18) / static_cast<std::size_t>(world().size());
  std::vector<float> in(share * static_cast<std::size_t>(world().size()), 1.0f), out(share);
  Work w = world().ireduce_scatter(in, out, ReduceOp::sum);
  w.wait();
  EXPECT_EQ(w.backend(), "hier");
  EXPECT_EQ(out[share - 1], static_cast<float>(world().size()));
}

// explain() names each step's library and where the choice came from: within a host the default
// priority, between hosts hier's preset (Gloo from 1 MiB) where nothing else decides; a smaller
// step between hosts stays with the default priority.
TEST(Hier, ExplainNamesEachStep) {
  if (!has_hier(world())) GTEST_SKIP() << "hier is not up here";
  const char* rules = std::getenv("MCR_RULES");
  if (rules == nullptr || std::string(rules) != "reduce_scatter:64K-=hier") {
    GTEST_SKIP() << "launched without MCR_RULES=reduce_scatter:64K-=hier";
  }
  const std::size_t big = std::size_t{4} << 20, small = std::size_t{256} << 10;
  const Selection s =
      world().explain(OpType::reduce_scatter, DType::f32, big, ReduceOp::sum, Device::cpu());
  ASSERT_EQ(s.backend, "hier");
  ASSERT_EQ(s.composed.size(), 2u);
  EXPECT_TRUE(s.composed[0].within_host);
  EXPECT_EQ(s.composed[0].op, OpType::reduce_scatter);
  EXPECT_EQ(s.composed[0].bytes, big);
  EXPECT_EQ(s.composed[0].source, "default");
  EXPECT_FALSE(s.composed[1].within_host);
  EXPECT_EQ(s.composed[1].bytes, big / 2);
  const auto names = world().backends();
  if (std::find(names.begin(), names.end(), "gloo") != names.end()) {
    EXPECT_EQ(s.composed[1].backend, "gloo");
    EXPECT_EQ(s.composed[1].source, "preset") << s.composed[1].reason;
    EXPECT_NE(s.composed[1].reason.find("between hosts"), std::string::npos);
  }
  const Selection t =
      world().explain(OpType::reduce_scatter, DType::f32, small, ReduceOp::sum, Device::cpu());
  ASSERT_EQ(t.composed.size(), 2u);
  EXPECT_EQ(t.composed[1].bytes, small / 2);
  EXPECT_EQ(t.composed[1].source, "default");
  // A flat choice has no steps.
  EXPECT_TRUE(world().explain(OpType::reduce_scatter, DType::f32, 1024).composed.empty());
}

// Where hier cannot compose, it is absent and an explicit request says why.
TEST(Hier, UnusableSaysWhy) {
  const std::string expect = expectation();
  if (expect == "composes") GTEST_SKIP() << "this launch composes";
  EXPECT_FALSE(has_hier(world()));
  std::vector<float> buf(8, 1.0f);
  CallOptions opts;
  opts.backend = "hier";
  try {
    world().all_reduce(buf, ReduceOp::sum, opts);
    ADD_FAILURE() << "all_reduce on hier did not raise";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
  }
  const Selection s =
      world().explain(OpType::all_reduce, DType::f32, 32, ReduceOp::sum, Device::cpu());
  EXPECT_NE(s.backend, "hier");
}

// Composed and flat operations interleaved, async hier handles waited last and in reverse order:
// hier's sub-operations advance while the rank waits in flat operations (docs/design.md).
// A burst of asynchronous composed operations with nothing blocking between them overlaps (the
// next one's steps are issued while the last steps of the one before are in flight) and completes
// in whatever order the handles are waited for: pipelined all_reduces, a small all_reduce, an
// all_gather and a broadcast, waited in an order drawn from a fixed seed (printed).
TEST(Hier, AsyncBurstOverlapsAndCompletesInAnyOrder) {
  if (expectation() != "composes") GTEST_SKIP() << "this launch does not compose";
  const int size = world().size();
  const int rank = world().rank();
  CallOptions hier;
  hier.backend = "hier";
  constexpr std::size_t kBig = (std::size_t{9} << 20) / sizeof(float) + 5;  // 4 pieces, padded
  constexpr std::size_t kSmall = 4099;
  std::vector<std::vector<float>> big(3, std::vector<float>(kBig));
  std::vector<std::int32_t> small(kSmall);
  std::vector<std::int64_t> gathered(static_cast<std::size_t>(size) * 33), mine(33);
  std::vector<double> bcast(1000);
  std::vector<Work> works;
  for (std::size_t i = 0; i < big.size(); ++i) {
    for (std::size_t j = 0; j < kBig; ++j)
      big[i][j] =
          static_cast<float>((rank + 1) * static_cast<int>(i + 1) + static_cast<int>(j % 5));
    works.push_back(world().iall_reduce(big[i], ReduceOp::sum, hier));
    if (i == 0) {
      for (std::size_t j = 0; j < kSmall; ++j)
        small[j] = static_cast<std::int32_t>(rank + static_cast<int>(j % 11));
      works.push_back(world().iall_reduce(small, ReduceOp::sum, hier));
    }
    if (i == 1) {
      for (std::size_t j = 0; j < mine.size(); ++j)
        mine[j] = rank * 100 + static_cast<std::int64_t>(j);
      works.push_back(world().iall_gather(mine, gathered, hier));
      for (std::size_t j = 0; j < bcast.size(); ++j)
        bcast[j] = rank == size - 1 ? 0.5 * static_cast<double>(j) : -1.0;
      works.push_back(world().ibroadcast(bcast, size - 1, hier));
    }
  }
  const std::uint32_t seed = 20261201;
  std::vector<std::size_t> order(works.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(seed + static_cast<std::uint32_t>(rank)));
  if (rank == 0) std::printf("AsyncBurst: waiting in an order drawn from seed %u + rank\n", seed);
  for (std::size_t i : order)
    works[i].wait();
  const int ranks_sum = size * (size + 1) / 2;  // sum of (rank + 1)
  for (std::size_t i = 0; i < big.size(); ++i) {
    for (std::size_t j = 0; j < kBig; j += 4093) {
      const float want =
          static_cast<float>(ranks_sum * static_cast<int>(i + 1) + size * static_cast<int>(j % 5));
      ASSERT_EQ(big[i][j], want) << "all_reduce " << i << " element " << j;
    }
    ASSERT_EQ(big[i][kBig - 1], static_cast<float>(ranks_sum * static_cast<int>(i + 1) +
                                                   size * static_cast<int>((kBig - 1) % 5)));
  }
  for (std::size_t j = 0; j < kSmall; j += 101)
    ASSERT_EQ(small[j], size * (size - 1) / 2 + size * static_cast<int>(j % 11)) << j;
  for (int r = 0; r < size; ++r)
    for (std::size_t j = 0; j < mine.size(); ++j)
      ASSERT_EQ(gathered[static_cast<std::size_t>(r) * mine.size() + j],
                r * 100 + static_cast<std::int64_t>(j));
  for (std::size_t j = 0; j < bcast.size(); ++j)
    ASSERT_EQ(bcast[j], 0.5 * static_cast<double>(j)) << j;
}

TEST(Hier, AsyncComposedAcrossFlatOps) {
  if (expectation() != "composes") GTEST_SKIP() << "this launch does not compose";
  const int size = world().size();
  const int rank = world().rank();
  constexpr int kOps = 6;
  constexpr std::size_t kCount = 4099;
  std::vector<std::vector<std::int32_t>> bufs(kOps, std::vector<std::int32_t>(kCount));
  std::vector<Work> works;
  CallOptions hier;
  hier.backend = "hier";
  for (int i = 0; i < kOps; ++i) {
    for (std::size_t j = 0; j < kCount; ++j)
      bufs[static_cast<std::size_t>(i)][j] = static_cast<std::int32_t>(rank * 7 + i + j % 13);
    works.push_back(world().iall_reduce(bufs[static_cast<std::size_t>(i)], ReduceOp::sum, hier));
    std::vector<std::int32_t> flat(17, rank + 1);
    world().all_reduce(flat, ReduceOp::sum);  // synchronous, selected among the flat backends
    EXPECT_EQ(flat[0], size * (size + 1) / 2);
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it)
    it->wait();
  for (int i = 0; i < kOps; ++i) {
    for (std::size_t j = 0; j < kCount; j += 97) {
      const std::int32_t want = static_cast<std::int32_t>(7 * size * (size - 1) / 2 +
                                                          size * (i + static_cast<int>(j % 13)));
      ASSERT_EQ(bufs[static_cast<std::size_t>(i)][j], want) << "op " << i << " element " << j;
    }
  }
}

// Messages of several MiB are pipelined in pieces (docs/hier-backend.md): two pieces with padding,
// four without, sync and async, in place and not.
TEST(Hier, PipelinedLargeAllReduce) {
  if (expectation() != "composes") GTEST_SKIP() << "this launch does not compose";
  const int size = world().size();
  const int rank = world().rank();
  CallOptions hier;
  hier.backend = "hier";
  for (const std::size_t count : {std::size_t{(8u << 20) / 4 + 5}, std::size_t{(16u << 20) / 4}}) {
    for (const bool async : {false, true}) {
      for (const bool in_place : {false, true}) {
        std::vector<std::int32_t> in(count), out(count, -1);
        for (std::size_t j = 0; j < count; ++j)
          in[j] = static_cast<std::int32_t>(rank * 1000 + static_cast<int>(j % 101));
        std::vector<std::int32_t>& result = in_place ? in : out;
        if (async) {
          Work w = in_place ? world().iall_reduce(in, ReduceOp::sum, hier)
                            : world().iall_reduce(in, out, ReduceOp::sum, hier);
          w.wait();
        } else if (in_place) {
          world().all_reduce(in, ReduceOp::sum, hier);
        } else {
          world().all_reduce(in, out, ReduceOp::sum, hier);
        }
        for (std::size_t j = 0; j < count; j += 4093) {
          const auto want = static_cast<std::int32_t>(1000 * size * (size - 1) / 2 +
                                                      size * static_cast<int>(j % 101));
          ASSERT_EQ(result[j], want) << "count " << count << " element " << j;
        }
        ASSERT_EQ(result[count - 1],
                  static_cast<std::int32_t>(1000 * size * (size - 1) / 2 +
                                            size * static_cast<int>((count - 1) % 101)));
      }
    }
  }
}

}  // namespace
}  // namespace mcr::test
