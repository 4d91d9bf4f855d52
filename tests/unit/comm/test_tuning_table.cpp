#include <gtest/gtest.h>

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
