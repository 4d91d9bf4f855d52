#include <gtest/gtest.h>

#include <string>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/range.hpp"

namespace mcr::codesign::bench {
namespace {

using Values = std::vector<std::int64_t>;

TEST(ParseDimValues, SingleValuesAndLists) {
  EXPECT_EQ(parse_dim_values("128", "-m"), Values({128}));
  EXPECT_EQ(parse_dim_values("64,127,128", "-m"), Values({64, 127, 128}));
  EXPECT_EQ(parse_dim_values(" 64 , 255 ", "-m"), Values({64, 255}));
  EXPECT_EQ(parse_dim_values("8,8", "-m"), Values({8, 8}));  // duplicates kept, order kept
}

TEST(ParseDimValues, RangesAreInclusive) {
  EXPECT_EQ(parse_dim_values("256:1024:256", "-n"), Values({256, 512, 768, 1024}));
  EXPECT_EQ(parse_dim_values("1:5", "-n"), Values({1, 2, 3, 4, 5}));
  EXPECT_EQ(parse_dim_values("8:8", "-n"), Values({8}));
  // The end is included only when the step lands on it: 10, 17 (24 > 20).
  EXPECT_EQ(parse_dim_values("10:20:7", "-n"), Values({10, 17}));
  EXPECT_EQ(parse_dim_values("1,8:32:8,1000", "-k"), Values({1, 8, 16, 24, 32, 1000}));
}

TEST(ParseDimValues, RangesEndingNearTheLargestIntegerStop) {
  // The step past the last value would overflow: the range still ends with its last value.
  EXPECT_EQ(parse_dim_values("9223372036854775800:9223372036854775807:4", "-m"),
            Values({9223372036854775800, 9223372036854775804}));
}

void expect_rejected(const std::string& text, const std::string& needle) {
  try {
    parse_dim_values(text, "--batch");
    FAIL() << "'" << text << "' was accepted";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--batch"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << "missing '" << needle << "': " << message;
  }
}

TEST(ParseDimValues, RejectsBadInputNamingArgumentValueAndRule) {
  expect_rejected("", "empty");
  expect_rejected("0", "positive");
  expect_rejected("-5", "positive");
  expect_rejected("abc", "'abc'");
  expect_rejected("12x", "'12x'");
  expect_rejected("5:1", "start 5 greater than end 1");
  expect_rejected("1:10:0", "step 0");
  expect_rejected("1:2:3:4", "more than two ':'");
  expect_rejected("1,,2", "empty item");
  expect_rejected("1:1000000", "more than 100000 values");
}

}  // namespace
}  // namespace mcr::codesign::bench
