#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <fmt/format.h>

#include "mcr/comm/info.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"

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
  // "float" and "int" would read as f32 and i32 only, where the tuning table means classes.
  EXPECT_NE(message("all_reduce/float:*=mpi").find("dtype 'float' is ambiguous in a rule"),
            std::string::npos);
  EXPECT_NE(message("all_reduce/int:*=mpi").find("write i32"), std::string::npos);
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
  // A key given twice: JSON would keep the second backend without a word.
  try {
    (void)RuleSet::parse_json(
        R"({"rules": [{"op": "all_reduce", "backend": "mpi", "backend": "gloo"}]})");
    ADD_FAILURE() << "a key given twice was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rules[0]: \"backend\" given twice in one object"),
              std::string::npos)
        << e.what();
  }
}

TEST(Sizes, ParseAndFormat) {
  EXPECT_EQ(parse_size("64"), 64u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("2MiB"), 2u << 20);
  EXPECT_EQ(parse_size("1G"), 1u << 30);
  // Lower case for every suffix, as nccl-tests reads them ("4k" was taken, "4m" refused).
  EXPECT_EQ(parse_size("4k"), 4u << 10);
  EXPECT_EQ(parse_size("4m"), 4u << 20);
  EXPECT_EQ(parse_size("2g"), 2u << 30);
  EXPECT_THROW(parse_size("K"), InvalidArgument);
  EXPECT_THROW(parse_size("-5"), InvalidArgument);
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(100), "100");
}

namespace {
std::string error_of(std::string_view what, const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return fmt::format("{}: no InvalidArgument", what);
}
std::string size_error(std::string_view text) {
  return error_of(text, [&] { (void)parse_size(text); });
}
std::string json_rule_error(std::string_view rule) {
  const std::string doc = fmt::format(R"({{"rules": [{}]}})", rule);
  return error_of(rule, [&] { (void)RuleSet::parse_json(doc); });
}
}  // namespace

TEST(Rules, UnknownBackendNamesTheRuleAndTheKnownNames) {
  const auto m = error_of("glo", [] { RuleSet::parse("all_reduce:0-64K=mpi;all_reduce:*=glo"); });
  EXPECT_NE(m.find("rule #2 'all_reduce:*=glo': unknown backend 'glo'"), std::string::npos) << m;
  EXPECT_NE(m.find("known backends: nccl, mpi, gloo"), std::string::npos) << m;
  EXPECT_NE(m.find("compiled into this build: "), std::string::npos) << m;
  // Every backend mcr has is a valid rule target, whether or not this build compiled it.
  for (const auto& name : backend_names())
    EXPECT_NO_THROW(RuleSet::parse(fmt::format("broadcast:*={}", name))) << name;
  const auto j = json_rule_error(R"({"op": "all_reduce", "backend": "ucx"})");
  EXPECT_NE(j.find("rules[0] {\"backend\":\"ucx\",\"op\":\"all_reduce\"}: unknown backend 'ucx'"),
            std::string::npos)
      << j;
}

TEST(Sizes, RangeCheckedWithTheRuleNamed) {
  EXPECT_EQ(parse_size("4KiB"), 4096u);
  EXPECT_EQ(parse_size("4KB"), 4096u);
  EXPECT_EQ(parse_size("4k"), 4096u);
  EXPECT_EQ(parse_size("64B"), 64u);
  EXPECT_EQ(parse_size("3GiB"), std::size_t{3} << 30);
  EXPECT_EQ(parse_size("18446744073709551615"), kMaxBytes);
  EXPECT_EQ(parse_size("17179869183G"), (std::size_t{17179869183} << 30));
  EXPECT_NE(size_error("-5").find("size '-5' is negative"), std::string::npos);
  EXPECT_NE(size_error("18446744073709551616").find("overflows"), std::string::npos);
  EXPECT_NE(size_error("17179869184G").find("size '17179869184G' overflows"), std::string::npos);
  EXPECT_NE(size_error("1.5K").find("size '1.5K' is not a whole number of bytes"),
            std::string::npos);
  EXPECT_NE(size_error("1e3").find("not a whole number"), std::string::npos);
  EXPECT_NE(size_error("4TiB").find("unknown suffix 'TiB'"), std::string::npos);
  EXPECT_NE(size_error("").find("is not a byte count"), std::string::npos);
  // In a rule, the rule is named too.
  const auto m = error_of("rule", [] { RuleSet::parse("all_reduce:0-99999999999999999999=mpi"); });
  EXPECT_NE(m.find("rule #1 'all_reduce:0-99999999999999999999=mpi': size "), std::string::npos)
      << m;
  EXPECT_NE(m.find("overflows"), std::string::npos) << m;
}

TEST(Rules, JsonByteCountsAreRangeChecked) {
  // nlohmann would turn -5 into 2^64-5: refused, as are fractions and huge numbers.
  EXPECT_NE(json_rule_error(R"({"min_bytes": -5, "backend": "mpi"})")
                .find("rules[0] {\"backend\":\"mpi\",\"min_bytes\":-5}: min_bytes -5 is negative"),
            std::string::npos);
  EXPECT_NE(json_rule_error(R"({"max_bytes": 1.5, "backend": "mpi"})")
                .find("max_bytes 1.5 is not a whole number of bytes"),
            std::string::npos);
  EXPECT_NE(json_rule_error(R"({"max_bytes": 1e30, "backend": "mpi"})").find("overflows"),
            std::string::npos);
  EXPECT_NE(
      json_rule_error(R"({"max_bytes": true, "backend": "mpi"})").find("must be a byte count"),
      std::string::npos);
  EXPECT_NE(json_rule_error(R"({"min_bytes": "-1K", "backend": "mpi"})")
                .find("min_bytes: size '-1K' is negative"),
            std::string::npos);
  EXPECT_NE(json_rule_error(R"({"min_bytes": 9, "max_bytes": 8, "backend": "mpi"})")
                .find("min_bytes 9 > max_bytes 8"),
            std::string::npos);
  // A misspelt key would silently widen the rule.
  EXPECT_NE(json_rule_error(R"({"max_byte": 64, "backend": "mpi"})").find("unknown key 'max_byte'"),
            std::string::npos);
  const auto ok = RuleSet::parse_json(
      R"({"rules": [{"op": "*", "dtype": "*", "min_bytes": "4KiB", "max_bytes": null, "backend": "gloo"}]})");
  ASSERT_EQ(ok.rules.size(), 1u);
  EXPECT_EQ(ok.rules[0].min_bytes, 4096u);
  EXPECT_EQ(ok.rules[0].max_bytes, kMaxBytes);
}
