// `mcr tune --validate`: every problem of a table file is reported, with where it is.
#include <gtest/gtest.h>

#include <algorithm>

#include "mcr/bench.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"

using namespace mcr::bench;

namespace {
bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.find(text) != std::string::npos; });
}
std::string dump(const std::vector<std::string>& p) {
  std::string s;
  for (const auto& x : p)
    s += x + "\n";
  return s;
}
}  // namespace

TEST(Validate, ReportsEveryUnknownOpBackendAndClass) {
  const char* text = R"({"format": "mcr-tuning", "version": 1, "entries": [
    {"op": "allreduse", "dtype_class": "float", "group_size": 2, "ranges": [{"min_bytes": 0, "max_bytes": null, "backend": "mpi"}]},
    {"op": "broadcast", "dtype_class": "complex", "group_size": 2, "ranges": [{"min_bytes": 0, "max_bytes": null, "backend": "ucx"}]}],
    "samples": [{"op": "scan", "dtype_class": "float", "group_size": 2, "bytes": 4, "backend": "mpi", "time_us": 1}]})";
  const auto p = validate_table_text(text);
  EXPECT_TRUE(mentions(p, "entries[0]: unknown op 'allreduse'")) << dump(p);
  EXPECT_TRUE(mentions(p, "entries[1]: unknown dtype_class \"complex\"")) << dump(p);
  EXPECT_TRUE(mentions(p, "entries[1].ranges[0]: unknown backend 'ucx'")) << dump(p);
  EXPECT_TRUE(mentions(p, "samples[0]: unknown op 'scan'")) << dump(p);
}

// A key given twice in one object is a problem: JSON keeps the last value without a word, so a
// range's "max_bytes": 65535 followed by "max_bytes": null meant "unbounded".
TEST(Validate, ReportsKeysGivenTwice) {
  const char* text = R"({"format": "mcr-tuning", "version": 1, "entries": [
    {"op": "all_reduce", "dtype_class": "float", "group_size": 2, "ranges": [
       {"min_bytes": 0, "max_bytes": 65535, "max_bytes": null, "backend": "mpi"}]}]})";
  const auto p = validate_table_text(text);
  EXPECT_TRUE(mentions(p, "entries[0].ranges[0]: \"max_bytes\" given twice in one object"))
      << dump(p);
  EXPECT_THROW(mcr::TuningTable::parse_json(text), mcr::InvalidArgument);
  // The same key in two objects is no repetition.
  const char* two = R"({"format": "mcr-tuning", "version": 1, "entries": [
    {"op": "all_reduce", "dtype_class": "float", "group_size": 2, "ranges": [
       {"min_bytes": 0, "max_bytes": 99, "backend": "mpi"},
       {"min_bytes": 100, "max_bytes": null, "backend": "gloo"}]}]})";
  EXPECT_TRUE(validate_table_text(two).empty()) << dump(validate_table_text(two));
}

TEST(Validate, ReportsGapsOverlapsAndDuplicates) {
  const char* text = R"({"format": "mcr-tuning", "version": 1, "entries": [
    {"op": "all_reduce", "dtype_class": "float", "group_size": 2, "ranges": [
       {"min_bytes": 0, "max_bytes": 99, "backend": "mpi"}, {"min_bytes": 200, "max_bytes": null, "backend": "gloo"}]},
    {"op": "all_gather", "dtype_class": "any", "group_size": 2, "ranges": [
       {"min_bytes": 0, "max_bytes": 500, "backend": "mpi"}, {"min_bytes": 400, "max_bytes": null, "backend": "gloo"}]},
    {"op": "all_gather", "dtype_class": "any", "group_size": 2, "ranges": [{"min_bytes": 16, "max_bytes": 31, "backend": "mpi"}]}]})";
  const auto p = validate_table_text(text);
  EXPECT_TRUE(mentions(p, "gap: bytes [100, 199]")) << dump(p);
  EXPECT_TRUE(mentions(p, "overlap")) << dump(p);
  EXPECT_TRUE(mentions(p, "duplicate entry")) << dump(p);
  EXPECT_TRUE(mentions(p, "gap: bytes [0, 15]")) << dump(p);
  EXPECT_TRUE(mentions(p, "gap: bytes above 31")) << dump(p);
}

TEST(Validate, ReportsFormatVersionAndJsonErrors) {
  EXPECT_TRUE(mentions(validate_table_text("{not json"), "not valid JSON"));
  const auto p = validate_table_text(R"({"format": "other", "version": 2, "entries": []})");
  EXPECT_TRUE(mentions(p, "\"format\" must be \"mcr-tuning\"")) << dump(p);
  EXPECT_TRUE(mentions(p, "\"version\" must be 1 (found 2)")) << dump(p);
  EXPECT_TRUE(mentions(p, "\"entries\" must be a non-empty array")) << dump(p);
  // A "format" that is not a string is listed too (it was a bare JSON type error, out of every
  // handler), and loading such a table is an InvalidArgument.
  const auto q = validate_table_text(R"({"format": 1, "version": 1, "entries": []})");
  EXPECT_TRUE(mentions(q, "\"format\" must be \"mcr-tuning\" (found 1)")) << dump(q);
  EXPECT_THROW(mcr::TuningTable::parse_json(R"({"format": null, "version": 1, "entries": []})"),
               mcr::InvalidArgument);
}

TEST(Validate, AcceptsAValidTable) {
  const char* text = R"({"format": "mcr-tuning", "version": 1, "entries": [
    {"op": "all_reduce", "dtype_class": "float", "group_size": 2, "ranges": [
       {"min_bytes": 0, "max_bytes": 65535, "backend": "mpi"}, {"min_bytes": 65536, "max_bytes": null, "backend": "gloo"}]}]})";
  EXPECT_TRUE(validate_table_text(text).empty()) << dump(validate_table_text(text));
}
