#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"

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

// The table is written beside the file and renamed over it: the old table is replaced whole, no
// temporary file is left, a link keeps naming the table, and a directory that cannot be written is
// named.
TEST(TuningTable, SaveReplacesTheFileWholeAndLeavesNothingBeside) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "table_save";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "table.json").string();
  {
    std::ofstream out(path);
    out << std::string(100000, ' ') << "{}";  // longer than the table: no tail may survive
  }
  const TuningTable t = sample_table();
  t.save(path);
  EXPECT_EQ(TuningTable::load(path).entries, t.entries);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"table.json"});  // no temporary left beside it
  // Through a link (a shared table MCR_TUNING names through it): the table it names is replaced,
  // the link stays one.
  const auto link = dir / "link.json";
  std::filesystem::create_symlink("table.json", link);
  TuningTable other = t;
  other.entries.pop_back();
  other.save(link.string());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(TuningTable::load(path).entries, other.entries);
  const std::string missing = (dir / "no-such-dir" / "table.json").string();
  try {
    t.save(missing);
    ADD_FAILURE() << "a table was saved into a missing directory";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// ---- topology: hosts x ranks per host
// ------------------------------------------------------------

namespace {
// An entry over every byte count on one backend, for `hosts` x `rph` (0: any).
TuningEntry whole(OpType op, std::string cls, int group_size, int hosts, int rph,
                  std::string backend) {
  TuningEntry e{op, std::move(cls), group_size, {{0, kMaxBytes, std::move(backend)}}};
  e.hosts = hosts;
  e.ranks_per_host = rph;
  return e;
}
std::string with_entries(std::string_view entries) {
  return fmt::format(R"({{"format": "mcr-tuning", "version": 1, "entries": [{}]}})", entries);
}
}  // namespace

TEST(TuningTableTopology, OldTablesReadAsAnyTopologyAndKeepTheirHash) {
  const auto t = TuningTable::parse_json(
      with_entries(R"({"op": "all_reduce", "ranges": [{"backend": "gloo"}]})"));
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].hosts, 0);
  EXPECT_EQ(t.entries[0].ranks_per_host, 0);
  EXPECT_EQ(t.entries[0].topology(), "any topology");
  // Written back without the keys, and hashed as before they existed (the canonical form written
  // out by hand: op|class|group size|lo-hi=backend;).
  EXPECT_EQ(t.to_json().find("hosts"), std::string::npos);
  EXPECT_EQ(t.selection_hash(), fnv1a("all_reduce|any|0|0-18446744073709551615=gloo;"));
  // It fits every shape, known or not.
  for (HostShape s : {HostShape{4, 1}, HostShape{2, 2}, HostShape{3, 0}, HostShape{}})
    EXPECT_EQ(*t.lookup(OpType::all_reduce, DType::f32, 4, s, 8), "gloo") << describe(s);
}

TEST(TuningTableTopology, KeysRoundTripAndChangeTheHash) {
  const auto t = TuningTable::parse_json(with_entries(
      R"({"op": "all_reduce", "group_size": 4, "hosts": 4, "ranks_per_host": 1,
          "ranges": [{"backend": "gloo"}]})"));
  EXPECT_EQ(t.entries[0].hosts, 4);
  EXPECT_EQ(t.entries[0].ranks_per_host, 1);
  EXPECT_EQ(t.entries[0].topology(), "4x1");
  const auto back = TuningTable::parse_json(t.to_json());
  EXPECT_EQ(back.entries, t.entries);
  EXPECT_EQ(back.selection_hash(), t.selection_hash());
  auto other = t;
  other.entries[0].hosts = 2;
  other.entries[0].ranks_per_host = 2;
  EXPECT_NE(other.selection_hash(), t.selection_hash());
  // Samples carry them too.
  TuningTable s = sample_table();
  s.samples[0].hosts = 1;
  s.samples[0].ranks_per_host = 2;
  const auto sback = TuningTable::parse_json(s.to_json());
  EXPECT_EQ(sback.samples, s.samples);
}

TEST(TuningTableTopology, BadValuesNamedWithEntryAndRule) {
  const auto p = TuningTable::problems(with_entries(
      R"({"op": "all_reduce", "hosts": -1, "ranks_per_host": "2", "ranges": [{"backend": "mpi"}]},
         {"op": "broadcast", "hosts": 1.5, "ranges": [{"backend": "mpi"}]})"));
  EXPECT_TRUE(mentions(p, "entries[0]: hosts -1 must be an integer >= 1 (0 or absent: any)"));
  EXPECT_TRUE(
      mentions(p, "entries[0]: ranks_per_host \"2\" must be an integer >= 1 (0 or absent: any)"));
  EXPECT_TRUE(mentions(p, "entries[1]: hosts 1.5 must be an integer >= 1"));
  // A sample is checked the same way.
  EXPECT_TRUE(mentions(TuningTable::problems(R"({"format": "mcr-tuning", "version": 1,
        "entries": [{"op": "all_reduce", "ranges": [{"backend": "mpi"}]}],
        "samples": [{"op": "all_reduce", "bytes": 4, "backend": "mpi", "time_us": 1,
                     "ranks_per_host": -3}]})"),
                       "samples[0]: ranks_per_host -3 must be an integer >= 1"));
  // A group size that contradicts hosts x ranks per host.
  EXPECT_TRUE(
      mentions(TuningTable::problems(with_entries(
                   R"({"op": "all_reduce", "group_size": 4, "hosts": 2,
                               "ranks_per_host": 1, "ranges": [{"backend": "mpi"}]})")),
               "entries[0] (all_reduce, dtype_class any, group_size 4, hosts 2, "
               "ranks_per_host 1): group_size 4 is not hosts x ranks_per_host (2 x 1 = 2)"));
}

TEST(TuningTableTopology, DuplicateKeyIncludesTheTopology) {
  const std::string a = R"({"op": "all_reduce", "hosts": 4, "ranks_per_host": 1,
                             "ranges": [{"backend": "mpi"}]})";
  const std::string b = R"({"op": "all_reduce", "hosts": 2, "ranks_per_host": 2,
                             "ranges": [{"backend": "gloo"}]})";
  const std::string any = R"({"op": "all_reduce", "ranges": [{"backend": "gloo"}]})";
  EXPECT_TRUE(TuningTable::problems(with_entries(a + "," + b + "," + any)).empty());
  const auto p = TuningTable::problems(with_entries(a + "," + any + "," + a));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("entries[2] (all_reduce, dtype_class any, group_size 0, hosts 4, "
                      "ranks_per_host 1): duplicate entry (entries[0] has the same op, "
                      "dtype_class, group_size, hosts, ranks_per_host and form)"),
            std::string::npos)
      << p[0];
  // And loading it names the file.
  const std::string path = ::testing::TempDir() + "table_duplicate_topology.json";
  {
    std::ofstream out(path);
    out << with_entries(a + "," + a);
  }
  try {
    (void)TuningTable::load(path);
    ADD_FAILURE() << "load accepted a duplicate entry";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(fmt::format("tuning table '{}' is invalid", path)), std::string::npos) << m;
    EXPECT_NE(m.find("duplicate entry"), std::string::npos) << m;
  }
}

TEST(TuningTableTopology, ExactShapeBeatsPartialBeatsAny) {
  TuningTable t;
  // Exact group size and dtype class, but no topology: the least specific on topology.
  t.entries.push_back(whole(OpType::all_reduce, "float", 2, 0, 0, "any-shape"));
  t.entries.push_back(whole(OpType::all_reduce, "any", 0, 1, 0, "one-host"));
  t.entries.push_back(whole(OpType::all_reduce, "any", 0, 1, 2, "1x2"));
  t.entries.push_back(whole(OpType::all_reduce, "any", 0, 2, 0, "two-hosts"));
  auto pick = [&](int group, HostShape s) {
    const auto* b = t.lookup(OpType::all_reduce, DType::f32, group, s, 64);
    return b ? *b : std::string("none");
  };
  EXPECT_EQ(pick(2, {1, 2}), "1x2");        // both named beats group size and class
  EXPECT_EQ(pick(3, {1, 3}), "one-host");   // hosts named beats nothing named
  EXPECT_EQ(pick(2, {2, 1}), "two-hosts");  // hosts named beats exact group size + class
  EXPECT_EQ(pick(4, {2, 0}), "two-hosts");  // uneven: the open ranks_per_host fits
  EXPECT_EQ(pick(2, {4, 0}), "any-shape");  // uneven 4 hosts: only the wildcard fits
  EXPECT_EQ(pick(2, {}), "any-shape");      // unknown shape: only the wildcard fits
}

TEST(TuningTableTopology, OtherTopologyIsNotAppliedAndSaysWhy) {
  TuningTable t;
  t.entries.push_back(whole(OpType::all_reduce, "any", 4, 4, 1, "gloo"));
  t.entries.push_back(whole(OpType::all_reduce, "any", 0, 8, 1, "gloo"));
  EXPECT_EQ(t.lookup(OpType::all_reduce, DType::f32, 4, HostShape{2, 2}, 64), nullptr);
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::f32, 4, HostShape{2, 2}),
            "measured on 4x1, 8x1, this communicator is 2x2; not applied");
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::f32, 2, HostShape{1, 2}),
            "measured on 8x1, this communicator is 1x2; not applied");
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::f32, 4, HostShape{3, 0}),
            "measured on 4x1, 8x1, this communicator is 3 hosts, uneven; not applied");
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::f32, 4, HostShape{}),
            "measured on 4x1, 8x1, this communicator has an unknown topology; not applied");
  // Where an entry fits, or the op has none, there is nothing to say.
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::f32, 4, HostShape{4, 1}), "");
  EXPECT_EQ(t.topology_mismatch(OpType::broadcast, DType::f32, 4, HostShape{2, 2}), "");
}

// A table measured on a world of another size (mcr tune on 8 ranks, the job on 16, or a subgroup
// the table has no entry for) says so: it was left to the default priority without a word.
TEST(TuningTableTopology, OtherGroupSizeIsNotAppliedAndSaysWhy) {
  TuningTable t;
  t.entries.push_back(whole(OpType::all_reduce, "float", 8, 8, 1, "gloo"));
  t.entries.push_back(whole(OpType::all_reduce, "any", 4, 4, 1, "gloo"));
  t.entries.push_back(whole(OpType::all_reduce, "int", 2, 2, 1, "gloo"));  // another class
  EXPECT_EQ(t.lookup(OpType::all_reduce, DType::f32, 16, HostShape{16, 1}, 64), nullptr);
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::f32, 16, HostShape{16, 1}),
            "measured with 4, 8 ranks, this communicator has 16; not applied");
  EXPECT_EQ(t.topology_mismatch(OpType::all_reduce, DType::i32, 16, HostShape{16, 1}),
            "measured with 2, 4 ranks, this communicator has 16; not applied");
  EXPECT_EQ(t.topology_mismatch(OpType::all_to_all, DType::f32, 16, HostShape{16, 1}), "");
}

// ---- call form: sync (blocking) and async (i*) entries
// -------------------------------------------

namespace {
TuningEntry whole_form(std::string form, std::string backend, int hosts = 0, int rph = 0) {
  TuningEntry e = whole(OpType::all_reduce, "any", 0, hosts, rph, std::move(backend));
  e.form = std::move(form);
  return e;
}
}  // namespace

TEST(TuningTableForm, EachFormReadsItsOwnEntryThenAnyThenTheOther) {
  TuningTable t;
  t.entries.push_back(whole_form("sync", "hier"));
  t.entries.push_back(whole_form("async", "mpi"));
  auto pick = [](const TuningTable& table, CallForm form) {
    const auto* b = table.lookup(OpType::all_reduce, DType::f32, 4, HostShape{2, 2}, 1 << 24, form);
    return b ? *b : std::string("none");
  };
  EXPECT_EQ(pick(t, CallForm::sync), "hier");
  EXPECT_EQ(pick(t, CallForm::async), "mpi");
  // A table of one form still decides for the other (as before forms were recorded)...
  TuningTable sync_only;
  sync_only.entries.push_back(whole_form("sync", "hier"));
  EXPECT_EQ(pick(sync_only, CallForm::async), "hier");
  // ...but an unrecorded form ("any") is preferred to the other form's measurement.
  sync_only.entries.push_back(whole_form("any", "gloo"));
  EXPECT_EQ(pick(sync_only, CallForm::async), "gloo");
  EXPECT_EQ(pick(sync_only, CallForm::sync), "hier");
  // The topology stays the most significant key: an exact-shape entry of the other form beats a
  // shapeless one of the call's own form.
  TuningTable shaped;
  shaped.entries.push_back(whole_form("sync", "hier", 2, 2));
  shaped.entries.push_back(whole_form("async", "mpi"));
  EXPECT_EQ(pick(shaped, CallForm::async), "hier");
}

TEST(TuningTableForm, RoundTripsWritesOnlyWhenRecordedAndChangesTheHash) {
  TuningTable t;
  t.entries.push_back(whole_form("sync", "hier"));
  t.entries.push_back(whole_form("async", "mpi"));
  t.samples.push_back({OpType::all_reduce, "float", 4, 64, "mpi", 2.0, 2, 2, "async"});
  const auto back = TuningTable::parse_json(t.to_json());
  EXPECT_EQ(back.entries, t.entries);
  EXPECT_EQ(back.samples, t.samples);
  EXPECT_EQ(back.selection_hash(), t.selection_hash());
  // An entry without a form reads as "any", is written without the key and hashes as before.
  const auto old = TuningTable::parse_json(
      with_entries(R"({"op": "all_reduce", "ranges": [{"backend": "gloo"}]})"));
  EXPECT_EQ(old.entries[0].form, "any");
  EXPECT_EQ(old.to_json().find("\"form\""), std::string::npos);
  EXPECT_EQ(old.selection_hash(), fnv1a("all_reduce|any|0|0-18446744073709551615=gloo;"));
  auto relabelled = t;
  relabelled.entries[1].form = "any";
  EXPECT_NE(relabelled.selection_hash(), t.selection_hash());
}

TEST(TuningTableForm, UnknownFormsAndDuplicatesNamed) {
  const auto p = TuningTable::problems(with_entries(
      R"({"op": "all_reduce", "form": "nonblocking", "ranges": [{"backend": "mpi"}]},
         {"op": "broadcast", "form": 1, "ranges": [{"backend": "mpi"}]})"));
  EXPECT_TRUE(mentions(p, "entries[0]: unknown form \"nonblocking\" (use sync, async or any)"));
  EXPECT_TRUE(mentions(p, "entries[1]: unknown form 1 (use sync, async or any)"));
  // Same key except the form: two entries, no duplicate.
  const std::string sync =
      R"({"op": "all_reduce", "form": "sync", "ranges": [{"backend": "mpi"}]})";
  const std::string async =
      R"({"op": "all_reduce", "form": "async", "ranges": [{"backend": "mpi"}]})";
  EXPECT_TRUE(TuningTable::problems(with_entries(sync + "," + async)).empty());
  const auto d = TuningTable::problems(with_entries(async + "," + async));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].find("entries[1] (all_reduce, dtype_class any, group_size 0, form async): "
                      "duplicate entry (entries[0] has the same op, dtype_class, group_size, "
                      "hosts, ranks_per_host and form)"),
            std::string::npos)
      << d[0];
}
