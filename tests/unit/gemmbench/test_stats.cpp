#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/stats.hpp"

namespace mcr::codesign::bench {
namespace {

TEST(Stats, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_THROW(median({}), InvalidArgument);
}

TEST(Stats, MedianAbsolutePercentError) {
  // Errors 10 %, 10 %, 0 %, 50 %: median of {0, 10, 10, 50} = 10.
  const std::vector<double> predicted = {110, 90, 100, 150};
  const std::vector<double> measured = {100, 100, 100, 100};
  EXPECT_DOUBLE_EQ(median_abs_pct_error(predicted, measured), 10.0);
  EXPECT_DOUBLE_EQ(abs_pct_error(75, 100), 25.0);
}

TEST(Stats, FractionalRanksAverageTies) {
  const std::vector<double> v = {5, 6, 7, 8, 7};
  EXPECT_EQ(fractional_ranks(v), (std::vector<double>{1, 2, 3.5, 5, 3.5}));
}

TEST(Stats, SpearmanPerfectAndReversed) {
  const std::vector<double> x = {1, 2, 3, 4, 5};
  const std::vector<double> squares = {1, 4, 9, 16, 25};  // monotone, not linear: still 1
  const std::vector<double> reversed = {50, 40, 30, 20, 10};
  EXPECT_DOUBLE_EQ(spearman(x, squares), 1.0);
  EXPECT_DOUBLE_EQ(spearman(x, reversed), -1.0);
}

TEST(Stats, SpearmanWithTiesMatchesHandComputation) {
  // Ranks of y = {1, 2, 3.5, 5, 3.5}; deviations from 3: x {-2,-1,0,1,2}, y {-2,-1,.5,2,.5}.
  // Sxy = 4 + 1 + 0 + 2 + 1 = 8, Sxx = 10, Syy = 9.5, rho = 8 / sqrt(95).
  const std::vector<double> x = {1, 2, 3, 4, 5};
  const std::vector<double> y = {5, 6, 7, 8, 7};
  EXPECT_NEAR(spearman(x, y), 8.0 / std::sqrt(95.0), 1e-12);
}

TEST(Stats, SpearmanRejectsTooFewOrMismatched) {
  const std::vector<double> one = {1};
  const std::vector<double> two = {1, 2};
  const std::vector<double> three = {1, 2, 3};
  EXPECT_THROW(spearman(one, one), InvalidArgument);
  EXPECT_THROW(spearman(two, three), InvalidArgument);
  EXPECT_DOUBLE_EQ(spearman(two, std::vector<double>{4, 4}), 0.0);  // constant side
}

}  // namespace
}  // namespace mcr::codesign::bench
