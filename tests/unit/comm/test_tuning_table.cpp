#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <fmt/format.h>

#include "mcr/errors.hpp"
#include "mcr/selection.hpp"

using namespace mcr;

namespace {
TuningTable sample_table() {
  TuningTable t;
  t.provenance["hosts"] = "1";
  t.entries.push_back(
      {OpType::all_reduce,
       "float",
       2,
       {{0, 65535, "mpi"}, {65536, (1u << 20) - 1, "gloo"}, {1u << 20, kMaxBytes, "mpi"}}});
  t.entries.push_back({OpType::all_reduce, "any", 0, {{0, kMaxBytes, "gloo"}}});
  t.samples.push_back({OpType::all_reduce, "float", 2, 4, "mpi", 1.5});
  return t;
}
}  // namespace

TEST(TuningTable, JsonRoundTrip) {
  auto t = sample_table();
  auto back = TuningTable::parse_json(t.to_json());
  EXPECT_EQ(back.entries, t.entries);
  EXPECT_EQ(back.samples, t.samples);
  EXPECT_EQ(back.provenance, t.provenance);
  EXPECT_EQ(back.selection_hash(), t.selection_hash());
}

TEST(TuningTable, LookupPrefersExactGroupSizeAndClass) {
  auto t = sample_table();
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 2, 4), "mpi");
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 2, 65536), "gloo");
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 2, 1u << 20), "mpi");
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::i32, 2, 4), "gloo");  // "any" entry
  EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 3, 4), "gloo");  // other group size
  EXPECT_EQ(t.lookup(OpType::broadcast, DType::f32, 2, 4), nullptr);
}

TEST(TuningTable, ValidatorReportsGapsOverlapsAndUnknowns) {
  TuningTable t;
  t.entries.push_back(
      {OpType::broadcast, "float", 2, {{16, 99, "mpi"}, {90, 200, "gloo"}, {300, 400, "shm"}}});
  auto problems = t.validate({"mpi", "gloo"});
  auto has = [&](std::string_view s) {
    for (const auto& p : problems) {
      if (p.find(s) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("bytes [0, 15] are not covered"));
  EXPECT_TRUE(has("overlap"));
  EXPECT_TRUE(has("bytes [201, 299] are not covered"));
  EXPECT_TRUE(has("unknown backend 'shm'"));
  EXPECT_TRUE(has("bytes above 400"));
  EXPECT_TRUE(sample_table().validate({"mpi", "gloo"}).empty());
}

TEST(TuningTable, RejectsWrongFormatAndVersion) {
  EXPECT_THROW(TuningTable::parse_json(R"({"format": "other", "version": 1})"), InvalidArgument);
  EXPECT_THROW(TuningTable::parse_json(R"({"format": "mcr-tuning", "version": 99})"),
               InvalidArgument);
  EXPECT_THROW(TuningTable::parse_json(R"({"format": "mcr-tuning", "version": 1,
      "entries": [{"op": "nope", "ranges": []}]})"),
               InvalidArgument);
}

namespace {
bool mentions(const std::vector<std::string>& problems, std::string_view text) {
  for (const auto& p : problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}
std::string parse_error(const std::string& text) {
  try {
    (void)TuningTable::parse_json(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument";
}
std::string one_range(std::string_view range) {
  return fmt::format(R"({{"format": "mcr-tuning", "version": 1, "entries": [{{"op": "all_reduce",
      "ranges": [{}]}}]}})",
                     range);
}
}  // namespace

TEST(TuningTable, ByteCountsAreRangeCheckedNotWrapped) {
  // nlohmann reads -5 as 2^64-5 when asked for a size_t: the table is refused instead.
  const auto m =
      parse_error(one_range(R"({"min_bytes": -5, "max_bytes": null, "backend": "mpi"})"));
  EXPECT_NE(m.find("entries[0].ranges[0]: min_bytes -5 is negative"), std::string::npos) << m;
  EXPECT_NE(m.find("mcr tune --validate"), std::string::npos) << m;
  EXPECT_TRUE(mentions(TuningTable::problems(one_range(R"({"max_bytes": 1.5, "backend": "mpi"})")),
                       "entries[0].ranges[0]: max_bytes 1.5 is not a whole number"));
  EXPECT_TRUE(
      mentions(TuningTable::problems(one_range(R"({"max_bytes": "64K", "backend": "mpi"})")),
               "max_bytes \"64K\" must be a byte count >= 0 (or null: unbounded)"));
  // A misspelt key would leave max_bytes unbounded.
  EXPECT_TRUE(mentions(TuningTable::problems(one_range(R"({"max_byte": 99, "backend": "mpi"})")),
                       "entries[0].ranges[0]: unknown key 'max_byte'"));
  EXPECT_TRUE(
      mentions(TuningTable::problems(
                   R"({"format": "mcr-tuning", "version": 1, "entries": [{"op": "all_reduce",
        "group_size": -2, "ranges": [{"backend": "mpi"}]}], "samples": [{"op": "all_reduce",
        "bytes": -1, "backend": "mpi", "time_us": 1}]})"),
               "samples[0]: bytes -1 is negative"));
}

TEST(TuningTable, ParseRejectsWhatValidateRejects) {
  // The same checks as `mcr tune --validate`: a table with a gap is never used.
  const std::string gap = one_range(R"({"min_bytes": 0, "max_bytes": 99, "backend": "mpi"},
                                       {"min_bytes": 200, "max_bytes": null, "backend": "gloo"})");
  const auto problems = TuningTable::problems(gap);
  ASSERT_EQ(problems.size(), 1u);
  const auto m = parse_error(gap);
  EXPECT_NE(m.find("tuning table is invalid (1 problem; `mcr tune --validate FILE` lists them): " +
                   problems[0]),
            std::string::npos)
      << m;
  EXPECT_NE(problems[0].find("entries[0] (all_reduce, dtype_class any, group_size 0): gap: bytes "
                             "[100, 199] are not covered"),
            std::string::npos)
      << problems[0];
  EXPECT_NE(parse_error(one_range(R"({"backend": "glo"})")).find("unknown backend 'glo'"),
            std::string::npos);
  EXPECT_TRUE(TuningTable::problems(sample_table().to_json()).empty());
}

TEST(TuningTable, LoadNamesTheFile) {
  const std::string path = ::testing::TempDir() + "table_negative.json";
  {
    std::ofstream out(path);
    out << one_range(R"({"min_bytes": -5, "max_bytes": null, "backend": "mpi"})");
  }
  try {
    (void)TuningTable::load(path);
    ADD_FAILURE() << "load accepted a negative min_bytes";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(fmt::format("tuning table '{}' is invalid (1 problem; `mcr tune --validate "
                                 "{}` lists them)",
                                 path, path)),
              std::string::npos)
        << m;
  }
}
