#include <gtest/gtest.h>

#include "mcr/errors.hpp"
#include "mcr/selection.hpp"

using namespace mcr;

TEST(Rules, ParsesTheDocumentedExample) {
  auto set = RuleSet::parse("all_reduce:0-64K=mpi;all_to_all:*=gloo");
  ASSERT_EQ(set.rules.size(), 2u);
  EXPECT_EQ(set.rules[0].op, OpType::all_reduce);
  EXPECT_EQ(set.rules[0].min_bytes, 0u);
  EXPECT_EQ(set.rules[0].max_bytes, 65536u);
  EXPECT_EQ(set.rules[0].backend, "mpi");
  EXPECT_EQ(set.rules[1].op, OpType::all_to_all);
  EXPECT_EQ(set.rules[1].max_bytes, kMaxBytes);
  EXPECT_TRUE(set.rules[0].matches(OpType::all_reduce, DType::f32, 65536));
  EXPECT_FALSE(set.rules[0].matches(OpType::all_reduce, DType::f32, 65537));
  EXPECT_EQ(set.canonical(), "all_reduce:0-64K=mpi;all_to_all:*=gloo");
}

TEST(Rules, DtypeOpenRangesAndWildcards) {
  auto set = RuleSet::parse(" */bf16 : 1M- = gloo ; broadcast:4096=mpi ;");
  ASSERT_EQ(set.rules.size(), 2u);
  EXPECT_FALSE(set.rules[0].op.has_value());
  EXPECT_EQ(set.rules[0].dtype, DType::bf16);
  EXPECT_EQ(set.rules[0].min_bytes, 1u << 20);
  EXPECT_TRUE(set.rules[0].matches(OpType::gather, DType::bf16, 5u << 20));
  EXPECT_FALSE(set.rules[0].matches(OpType::gather, DType::f32, 5u << 20));
  EXPECT_EQ(set.rules[1].min_bytes, 4096u);
  EXPECT_EQ(set.rules[1].max_bytes, 4096u);
  // Canonical form parses back to the same rules.
  EXPECT_EQ(RuleSet::parse(set.canonical()).rules, set.rules);
}

TEST(Rules, MalformedInputNamesTheToken) {
  auto message = [](std::string_view text) {
    try {
      RuleSet::parse(text);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("all_reduce=mpi").find("'all_reduce=mpi'"), std::string::npos);
  EXPECT_NE(message("allreduse:*=mpi").find("unknown operation 'allreduse'"), std::string::npos);
  EXPECT_NE(message("all_reduce:64Q=mpi").find("unknown suffix 'Q'"), std::string::npos);
  EXPECT_NE(message("all_reduce:2M-1K=mpi").find("lower bound above"), std::string::npos);
  EXPECT_NE(message("all_reduce:*=").find("names no backend"), std::string::npos);
  EXPECT_NE(message("all_reduce/f7:*=mpi").find("unknown dtype 'f7'"), std::string::npos);
}

TEST(Rules, JsonForms) {
  auto a =
      RuleSet::parse_json(R"({"rules": [{"op": "all_reduce", "min_bytes": 0, "max_bytes": "64K",
                                               "backend": "mpi"}, {"op": "*", "backend": "gloo"}]})");
  EXPECT_EQ(a.canonical(), "all_reduce:0-64K=mpi;*:*=gloo");
  auto b = RuleSet::parse_json(R"({"rules": "all_gather:*=gloo"})");
  EXPECT_EQ(b.canonical(), "all_gather:*=gloo");
  EXPECT_THROW(RuleSet::parse_json("{"), InvalidArgument);
  EXPECT_THROW(RuleSet::parse_json(R"({"rules": [{"op": "all_reduce"}]})"), InvalidArgument);
}

TEST(Sizes, ParseAndFormat) {
  EXPECT_EQ(parse_size("64"), 64u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("2MiB"), 2u << 20);
  EXPECT_EQ(parse_size("1G"), 1u << 30);
  EXPECT_THROW(parse_size("K"), InvalidArgument);
  EXPECT_THROW(parse_size("-5"), InvalidArgument);
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(100), "100");
}
