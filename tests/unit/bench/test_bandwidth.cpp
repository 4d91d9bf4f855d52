// Bandwidth conventions (nccl-tests src/*.cu GetBw functions), layouts and size sweeps.
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "mcr/bench.hpp"
#include "mcr/errors.hpp"

using namespace mcr;
using namespace mcr::bench;

TEST(Bandwidth, BusFactorsFollowNcclTests) {
  // all_reduce 2(n-1)/n, all_gather/reduce_scatter/all_to_all/gather/scatter (n-1)/n, others 1.
  EXPECT_DOUBLE_EQ(bus_factor(OpType::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::reduce_scatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::all_to_all, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::broadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::send, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpType::all_reduce, 1), 0.0);
}

TEST(Bandwidth, AlgbwIsBytesOverSecondsInGBps) {
  // 1 GB in 0.5 s = 2 GB/s; the same all_reduce at 4 ranks: busbw 2 * 1.5 = 3 GB/s.
  EXPECT_DOUBLE_EQ(algbw_gbps(1'000'000'000, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(busbw_gbps(OpType::all_reduce, 1'000'000'000, 0.5, 4), 3.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(100, 0.0), 0.0);
}

TEST(Layout, ByteCountsFollowTheTuningFormat) {
  // 1 KiB of f32 at 4 ranks: all_reduce 256 elements; all_gather 64 per rank, 1024 B output total;
  // reduce_scatter 1024 B input, 64 out; all_to_all 256 elements per rank, chunk 64.
  auto ar = layout_for(OpType::all_reduce, 1024, DType::f32, 4);
  EXPECT_EQ(ar.in_count, 256u);
  EXPECT_EQ(ar.bytes, 1024u);
  auto ag = layout_for(OpType::all_gather, 1024, DType::f32, 4);
  EXPECT_EQ(ag.in_count, 64u);
  EXPECT_EQ(ag.out_count, 256u);
  EXPECT_EQ(ag.bytes, 1024u);
  auto rs = layout_for(OpType::reduce_scatter, 1024, DType::f32, 4);
  EXPECT_EQ(rs.in_count, 256u);
  EXPECT_EQ(rs.out_count, 64u);
  auto a2a = layout_for(OpType::all_to_all, 1024, DType::f32, 4);
  EXPECT_EQ(a2a.chunk, 64u);
  EXPECT_EQ(a2a.bytes, 1024u);
  // Too small for one element per rank: rounded up to one (4 ranks x 4 B = 16 B).
  EXPECT_EQ(layout_for(OpType::all_gather, 4, DType::f32, 4).bytes, 16u);
  EXPECT_EQ(layout_for(OpType::barrier, 1024, DType::f32, 4).bytes, 0u);
}

TEST(Sizes, DistinctAfterRounding) {
  // 4 B and 8 B all_gather of f32 on 2 ranks are both one element per rank (8 B): measured once.
  EXPECT_EQ(distinct_sizes(OpType::all_gather, {4, 8, 16}, DType::f32, 2),
            (std::vector<std::size_t>{4, 16}));
  EXPECT_EQ(distinct_sizes(OpType::all_reduce, {4, 8, 16}, DType::f32, 2),
            (std::vector<std::size_t>{4, 8, 16}));
  EXPECT_EQ(distinct_sizes(OpType::barrier, {4, 8}, DType::f32, 2).size(), 1u);
}

TEST(Sizes, GeometricSweep) {
  EXPECT_EQ(geometric_sizes(4, 64, 2), (std::vector<std::size_t>{4, 8, 16, 32, 64}));
  EXPECT_EQ(geometric_sizes(4, 100, 4), (std::vector<std::size_t>{4, 16, 64}));
  EXPECT_EQ(geometric_sizes(0, 2, 2), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(geometric_sizes(8, 8, 2), (std::vector<std::size_t>{8}));
  EXPECT_THROW(geometric_sizes(64, 4, 2), InvalidArgument);
  EXPECT_THROW(geometric_sizes(4, 64, 1.0), InvalidArgument);
  // Infinite: the sweep was -b alone.
  EXPECT_THROW(geometric_sizes(4, 64, std::numeric_limits<double>::infinity()), InvalidArgument);
  // Up to the largest size: the sweep ends (before, a step past 2^63 converted to 2^63 and the
  // sweep crept on by one byte at a time); and a step factor too close to 1 is refused.
  const auto huge = geometric_sizes(std::size_t{1} << 62, SIZE_MAX, 2);
  EXPECT_EQ(huge, (std::vector<std::size_t>{std::size_t{1} << 62, std::size_t{1} << 63}));
  EXPECT_EQ(geometric_sizes(SIZE_MAX - 1, SIZE_MAX, 1.5), (std::vector<std::size_t>{SIZE_MAX - 1}));
  EXPECT_THROW(geometric_sizes(1, std::size_t{1} << 40, 1.000001), InvalidArgument);
  // The last step is rounded before it is compared with -e: 34 x 1.5 = 51.0 (51.26 from the
  // unrounded steps) is the size 51.
  EXPECT_EQ(geometric_sizes(1, 51, 1.5).back(), 51u);
}

TEST(Ops, ParsingNamesTheArgument) {
  EXPECT_EQ(parse_bench_op("all_reduce"), OpType::all_reduce);
  EXPECT_EQ(parse_bench_op("recv"), OpType::send);
  try {
    parse_bench_op("allreduse");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--op 'allreduse'"), std::string::npos) << e.what();
  }
}

TEST(Pattern, SmallIntegersSoSumsAreExact) {
  for (int r = 0; r < 4; ++r) {
    for (std::size_t i = 0; i < 1000; ++i) {
      const double v = pattern_value(7, r, i, DType::f16, 4);
      EXPECT_EQ(v, static_cast<double>(static_cast<int>(v)));
      EXPECT_GE(v, -6);
      EXPECT_LE(v, 6);
      EXPECT_GE(pattern_value(7, r, i, DType::u8, 4), 0);
    }
  }
  // Not constant: over the indices and across the ranks the values take several values, and a
  // rank's differ from its peer's (a constant pattern would check nothing of the placement).
  std::set<double> values;
  bool ranks_differ = false;
  for (std::size_t i = 0; i < 100; ++i) {
    values.insert(pattern_value(1, 0, i, DType::f32, 2));
    values.insert(pattern_value(1, 1, i, DType::f32, 2));
    ranks_differ |= pattern_value(1, 0, i, DType::f32, 2) != pattern_value(1, 1, i, DType::f32, 2);
  }
  EXPECT_GT(values.size(), 5u);
  EXPECT_TRUE(ranks_differ);
}

// Past 21 ranks the values narrow so that the sum over every rank stays exact in the dtype (and
// clear of the sentinel an unwritten output keeps: the ends of the 8-bit ranges): an i8 sum over
// 32 ranks of values in [-6, 6] overflowed, and a u8 one was converted from an out-of-range
// double, which is undefined.
TEST(Pattern, SumsOverManyRanksStayExact) {
  const struct {
    DType dtype;
    double limit;  // the largest sum magnitude held exactly, short of the sentinel
  } kinds[] = {{DType::i8, 127}, {DType::u8, 254}, {DType::bf16, 256}, {DType::f16, 2048}};
  for (const auto& k : kinds) {
    for (int n : {2, 21, 22, 32, 64, 100, 127, 200, 500}) {
      double largest = 0;  // the worst sum is n times the largest magnitude drawn
      for (int r = 0; r < std::min(n, 8); ++r) {
        for (std::size_t i = 0; i < 500; ++i) {
          const double v = pattern_value(3, r, i, k.dtype, n);
          EXPECT_EQ(v, static_cast<double>(static_cast<long long>(v)));
          if (k.dtype == DType::u8) {
            EXPECT_GE(v, 0);
          }
          largest = std::max(largest, std::abs(v));
        }
      }
      EXPECT_LE(largest * n, k.limit) << to_string(k.dtype) << " over " << n << " ranks";
    }
  }
  // Up to 21 ranks every dtype keeps the whole range.
  bool six = false;
  for (std::size_t i = 0; i < 200; ++i)
    six = six || pattern_value(5, 0, i, DType::i8, 21) == 6;
  EXPECT_TRUE(six);
}

// Only a sum narrows the values: at 256 ranks an all_gather, an all_to_all or a max of u8 drew
// zeros everywhere, so a block delivered to the wrong rank or slot still counted as right.
TEST(Pattern, OnlySumsNarrowTheValues) {
  EXPECT_EQ(summed_ranks(OpType::all_reduce, ReduceOp::sum, 256), 256);
  EXPECT_EQ(summed_ranks(OpType::reduce_scatter, ReduceOp::sum, 256), 256);
  EXPECT_EQ(summed_ranks(OpType::reduce, ReduceOp::sum, 256), 256);
  EXPECT_EQ(summed_ranks(OpType::all_reduce, ReduceOp::max, 256), 1);
  EXPECT_EQ(summed_ranks(OpType::all_gather, ReduceOp::sum, 256), 1);
  EXPECT_EQ(summed_ranks(OpType::all_to_all, ReduceOp::sum, 256), 1);
  EXPECT_EQ(summed_ranks(OpType::broadcast, ReduceOp::sum, 256), 1);
  for (const OpType op : {OpType::all_gather, OpType::all_to_all, OpType::send}) {
    std::set<double> values;
    for (std::size_t i = 0; i < 200; ++i)
      values.insert(pattern_value(9, 200, i, DType::u8, summed_ranks(op, ReduceOp::sum, 256)));
    EXPECT_EQ(values.size(), 13u) << to_string(op) << ": u8 values over 256 ranks";
  }
}

TEST(Stats, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
}

TEST(Stats, PairedRatioOfEqualRatiosIsExact) {
  const auto e = paired_ratio({2, 4, 6}, {1, 2, 3});
  EXPECT_DOUBLE_EQ(e.median, 2.0);
  EXPECT_DOUBLE_EQ(e.low, 2.0);
  EXPECT_DOUBLE_EQ(e.high, 2.0);
  EXPECT_EQ(e.pairs, 3u);
  EXPECT_DOUBLE_EQ(e.relative_half_width(), 0.0);
}

TEST(Stats, PairedRatioPairsUpToTheShorterAndSkipsNonPositiveDenominators) {
  // Pairs: 3/1, 1/0 (left out), 8/2; the fourth numerator has no partner.
  const auto e = paired_ratio({3, 1, 8, 100}, {1, 0, 2});
  EXPECT_EQ(e.pairs, 2u);
  EXPECT_DOUBLE_EQ(e.median, 3.5);
  EXPECT_DOUBLE_EQ(e.low, 3.0);  // fewer than 6 pairs: [min, max]
  EXPECT_DOUBLE_EQ(e.high, 4.0);
  EXPECT_EQ(paired_ratio({}, {}).pairs, 0u);
  EXPECT_DOUBLE_EQ(paired_ratio({1}, {0}).median, 0.0);
}

TEST(Stats, PairedRatioIntervalUsesTheBinomialOrderStatistics) {
  // Ratios 1..100 in shuffled order. For n = 100 the 95% interval of the median runs from the
  // 40th to the 61st smallest value (ranks (n -+ 1.96 sqrt(n)) / 2, as tabulated for the sign
  // test).
  std::vector<double> num, den;
  for (int i = 0; i < 100; ++i) {
    num.push_back(static_cast<double>((i * 37) % 100 + 1));
    den.push_back(1.0);
  }
  const auto e = paired_ratio(num, den);
  EXPECT_EQ(e.pairs, 100u);
  EXPECT_DOUBLE_EQ(e.median, 50.5);
  EXPECT_DOUBLE_EQ(e.low, 40.0);
  EXPECT_DOUBLE_EQ(e.high, 61.0);
  EXPECT_NEAR(e.relative_half_width(), 21.0 / 2 / 50.5, 1e-12);
}

TEST(Stats, PairedRatioIntervalCoversTheTrueMedianAboutNineteenTimesInTwenty) {
  const std::uint32_t seed = 20261129;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  // Times with heavy positive noise, as on a loaded machine; the true ratio of medians is 1.0.
  std::lognormal_distribution<double> noise(0.0, 0.3);
  const int trials = 4000;
  for (int n : {9, 41, 120}) {
    int covered = 0;
    for (int t = 0; t < trials; ++t) {
      std::vector<double> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        a[static_cast<std::size_t>(i)] = noise(rng);
        b[static_cast<std::size_t>(i)] = noise(rng);
      }
      const auto e = paired_ratio(a, b);
      if (e.low <= 1.0 && 1.0 <= e.high) ++covered;
    }
    const double coverage = static_cast<double>(covered) / trials;
    EXPECT_GE(coverage, 0.93) << "n = " << n;
    EXPECT_LE(coverage, 0.999) << "n = " << n;  // n = 9 gives [min, max]: 1 - 2^-8
  }
}
