// Selection precedence with stand-in backends: override -> rules -> tuning table -> presets ->
// default order.
#include <gtest/gtest.h>

#include "core/backend.hpp"
#include "mcr/errors.hpp"
#include "select/selector.hpp"

using namespace mcr;
using namespace mcr::detail;

namespace {

class FakeBackend final : public Backend {
 public:
  FakeBackend(std::string_view name, bool bf16,
              std::size_t max_count = static_cast<std::size_t>(-1))
      : name_(name), bf16_(bf16), max_count_(max_count) {}
  std::string_view name() const noexcept override { return name_; }
  std::size_t max_count() const noexcept override { return max_count_; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  Support supports(OpType, DType t, ReduceOp, Device::Kind d) const override {
    if (d != Device::Kind::cpu) return Support::no("cpu only");
    if (t == DType::bf16 && !bf16_) return Support::no("no bf16 here");
    return Support::yes();
  }
  std::unique_ptr<PendingOp> start(const OpArgs&) override { return nullptr; }
  std::unique_ptr<Backend> split(const std::vector<int>&, std::uint64_t) override {
    return nullptr;
  }

 private:
  std::string_view name_;
  bool bf16_;
  std::size_t max_count_;
};

struct Fixture {
  FakeBackend mpi{"mpi", false};
  FakeBackend gloo{"gloo", true};
  // Two ranks on one host unless said otherwise.
  Selector make(std::string_view rules, std::shared_ptr<TuningTable> table = nullptr,
                HostShape shape = {1, 2}) {
    return Selector(std::make_shared<RuleSet>(RuleSet::parse(rules)), std::move(table),
                    {&mpi, &gloo}, {{"nccl", "no CUDA device"}}, 2, shape);
  }
};

}  // namespace

TEST(Selector, DefaultPriorityThenSkipsUnsupported) {
  Fixture f;
  auto s = f.make("");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4).name(),
            "mpi");
  // bf16: mpi cannot, so the next in priority order runs it.
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::bf16, ReduceOp::sum, Device::Kind::cpu, 4).name(),
            "gloo");
  auto why = s.explain(OpType::all_reduce, DType::bf16, ReduceOp::sum, Device::Kind::cpu, 4);
  ASSERT_EQ(why.steps.size(), 2u);
  EXPECT_NE(why.steps[0].reason.find("no bf16 here"), std::string::npos);
  EXPECT_EQ(why.source, "default");
  EXPECT_THROW(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cuda, 4),
               UnsupportedError);
}

// A backend whose count limit a message exceeds is passed over from the first element past the
// limit: 10 f32 elements (40 bytes) fit, 11 (44 bytes) go to the next backend in priority order.
TEST(Selector, CountLimitExcludesFromTheFirstElementPastIt) {
  FakeBackend small{"mpi", true, 10};
  FakeBackend gloo{"gloo", true};
  Selector s(std::make_shared<RuleSet>(RuleSet::parse("")), nullptr, {&small, &gloo}, {}, 2,
             {1, 2});
  for (std::size_t count : {1u, 9u, 10u}) {
    EXPECT_EQ(
        s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, count * 4).name(),
        "mpi")
        << count << " elements";
  }
  for (std::size_t count : {11u, 12u, 1000u}) {
    EXPECT_EQ(
        s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, count * 4).name(),
        "gloo")
        << count << " elements";
  }
}

TEST(Selector, RulesBySizeAndTheirRangeEdges) {
  Fixture f;
  auto s = f.make("all_reduce:0-64K=gloo;all_reduce:64K-=mpi");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 0).name(),
            "gloo");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 65536).name(),
            "gloo");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 65537).name(),
            "mpi");
  EXPECT_EQ(s.pick(OpType::broadcast, DType::f32, ReduceOp::sum, Device::Kind::cpu, 65537).name(),
            "mpi");
  // A rule naming a backend that cannot run the dtype is skipped, with the reason recorded.
  auto skip = f.make("*:*=mpi");
  EXPECT_EQ(skip.pick(OpType::all_gather, DType::bf16, ReduceOp::sum, Device::Kind::cpu, 8).name(),
            "gloo");
  auto e = skip.explain(OpType::all_gather, DType::bf16, ReduceOp::sum, Device::Kind::cpu, 8);
  EXPECT_NE(e.steps[0].reason.find("skipped"), std::string::npos);
}

TEST(Selector, TuningTableBelowRulesAboveDefault) {
  Fixture f;
  auto table = std::make_shared<TuningTable>();
  table->entries.push_back(
      {OpType::all_reduce, "float", 2, {{0, 1023, "gloo"}, {1024, kMaxBytes, "mpi"}}});
  auto s = f.make("", table);
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 100).name(),
            "gloo");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096).name(),
            "mpi");
  EXPECT_EQ(s.explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 100).source,
            "tuning");
  auto ruled = f.make("all_reduce:*=mpi", table);
  EXPECT_EQ(
      ruled.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 100).name(),
      "mpi");
  EXPECT_NE(s.config_hash(), ruled.config_hash());
}

// Presets (a composing backend's defaults for its own sub-communicators) sit below rules and the
// tuning table and above default priority; explain names them and why.
TEST(Selector, PresetsBelowRulesAndTableAboveDefault) {
  Fixture f;
  const RuleSet preset{{Rule{std::nullopt, std::nullopt, 1024, kMaxBytes, "gloo"}}};
  auto s = f.make("");
  s.set_presets(preset, "because it was measured");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 1023).name(),
            "mpi");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 1024).name(),
            "gloo");
  const auto why =
      s.explain(OpType::all_gather, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096);
  EXPECT_EQ(why.source, "preset");
  ASSERT_EQ(why.steps.size(), 1u);
  EXPECT_NE(why.steps[0].reason.find("because it was measured"), std::string::npos)
      << why.steps[0].reason;
  EXPECT_NE(why.steps[0].reason.find("1K-"), std::string::npos) << why.steps[0].reason;

  // Set after a plan was built: the plan is rebuilt.
  auto late = f.make("");
  EXPECT_EQ(
      late.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096).name(),
      "mpi");
  late.set_presets(preset, "late");
  EXPECT_EQ(
      late.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096).name(),
      "gloo");

  // A rule and a table entry still decide.
  auto ruled = f.make("all_reduce:*=mpi");
  ruled.set_presets(preset, "preset");
  EXPECT_EQ(
      ruled.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096).name(),
      "mpi");
  auto table = std::make_shared<TuningTable>();
  table->entries.push_back({OpType::all_reduce, "float", 2, {{0, kMaxBytes, "mpi"}}});
  auto tuned = f.make("", table);
  tuned.set_presets(preset, "preset");
  EXPECT_EQ(
      tuned.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096).name(),
      "mpi");
  EXPECT_EQ(
      tuned.pick(OpType::broadcast, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4096).name(),
      "gloo");
}

TEST(Selector, OverrideErrorsNameBackendOpAndDtype) {
  Fixture f;
  auto s = f.make("");
  EXPECT_EQ(s.pick_override("gloo", OpType::gather, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4)
                .name(),
            "gloo");
  try {
    s.pick_override("mpi", OpType::all_reduce, DType::bf16, ReduceOp::sum, Device::Kind::cpu, 4);
    FAIL();
  } catch (const UnsupportedError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'mpi'"), std::string::npos);
    EXPECT_NE(m.find("all_reduce"), std::string::npos);
    EXPECT_NE(m.find("bf16"), std::string::npos);
  }
  EXPECT_THROW(
      s.pick_override("ucc", OpType::gather, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4),
      InvalidArgument);
  EXPECT_THROW(
      s.pick_override("nccl", OpType::gather, DType::f32, ReduceOp::sum, Device::Kind::cpu, 4),
      UnsupportedError);
}

namespace {
// all_reduce of any size on `backend`, measured on `hosts` x `rph` (0: any).
TuningEntry all_reduce_on(std::string backend, int hosts, int rph) {
  TuningEntry e{OpType::all_reduce, "any", 0, {{0, kMaxBytes, std::move(backend)}}};
  e.hosts = hosts;
  e.ranks_per_host = rph;
  return e;
}
}  // namespace

TEST(Selector, TableOfAnotherTopologyFallsBackAndSaysWhy) {
  Fixture f;
  auto elsewhere = std::make_shared<TuningTable>();
  elsewhere->entries.push_back(all_reduce_on("gloo", 4, 1));
  auto s = f.make("", elsewhere);  // 1x2
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 64).name(),
            "mpi");
  const auto e = s.explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 64);
  EXPECT_EQ(e.backend, "mpi");
  EXPECT_EQ(e.source, "default");
  ASSERT_FALSE(e.steps.empty());
  EXPECT_EQ(e.steps[0].reason,
            "default priority #1 (tuning table: measured on 4x1, this communicator is 1x2; not "
            "applied)");
  // An op the table has no entry for: nothing about the table.
  EXPECT_EQ(s.explain(OpType::broadcast, DType::f32, ReduceOp::sum, Device::Kind::cpu, 64)
                .steps[0]
                .reason,
            "default priority #1");
  // The same table on the topology it was measured on decides.
  auto there = f.make("", elsewhere, {4, 1});
  EXPECT_EQ(there.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 64).name(),
            "gloo");
  const auto t =
      there.explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 64);
  EXPECT_EQ(t.source, "tuning");
  EXPECT_NE(t.steps[0].reason.find("2 ranks on 4x1"), std::string::npos) << t.steps[0].reason;
  // Rules still come first.
  auto ruled = f.make("all_reduce:*=gloo", elsewhere);
  EXPECT_EQ(ruled.explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 64)
                .steps[0]
                .reason,
            "rule #1 (all_reduce:*=gloo)");
}

TEST(Selector, ExactTopologyBeatsWildcardWhichBeatsNothing) {
  Fixture f;
  auto table = std::make_shared<TuningTable>();
  table->entries.push_back(all_reduce_on("mpi", 0, 0));   // any topology
  table->entries.push_back(all_reduce_on("gloo", 1, 2));  // this one
  table->entries.push_back(all_reduce_on("mpi", 2, 1));   // another
  auto here = f.make("", table);
  EXPECT_EQ(here.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 8).name(),
            "gloo");
  auto wildcard_only = std::make_shared<TuningTable>();
  wildcard_only->entries.push_back(all_reduce_on("gloo", 0, 0));
  wildcard_only->entries.push_back(all_reduce_on("mpi", 4, 1));
  EXPECT_EQ(f.make("", wildcard_only)
                .explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 8)
                .source,
            "tuning");
  // Uneven groups only take entries that leave ranks per host open.
  auto uneven = f.make("", table, {2, 0});
  const auto u =
      uneven.explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 8);
  EXPECT_EQ(u.backend, "mpi");
  EXPECT_EQ(u.source, "tuning");  // the wildcard entry, not 2x1
  auto exact_only = std::make_shared<TuningTable>();
  exact_only->entries.push_back(all_reduce_on("gloo", 2, 1));
  const auto e = f.make("", exact_only, {2, 0})
                     .explain(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu, 8);
  EXPECT_EQ(e.source, "default");
  EXPECT_NE(e.steps[0].reason.find("measured on 2x1, this communicator is 2 hosts, uneven"),
            std::string::npos)
      << e.steps[0].reason;
  // Different topologies, different selection inputs: the cross-rank hash tells them apart.
  EXPECT_NE(f.make("", table).config_hash(), f.make("", exact_only).config_hash());
}

TEST(Selector, EachCallFormReadsItsOwnEntriesAndSaysWhich) {
  Fixture f;
  auto table = std::make_shared<TuningTable>();
  auto sync = all_reduce_on("gloo", 0, 0);
  sync.form = "sync";
  auto async = all_reduce_on("mpi", 0, 0);
  async.form = "async";
  table->entries = {sync, async};
  auto s = f.make("", table);
  const auto cpu = Device::Kind::cpu;
  // The same op and size, cached in separate plans per form.
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, cpu, 1 << 24).name(), "gloo");
  EXPECT_EQ(
      s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, cpu, 1 << 24, CallForm::async).name(),
      "mpi");
  EXPECT_EQ(s.pick(OpType::all_reduce, DType::f32, ReduceOp::sum, cpu, 1 << 24).name(), "gloo");
  const auto e =
      s.explain(OpType::all_reduce, DType::f32, ReduceOp::sum, cpu, 64, {}, CallForm::async);
  EXPECT_EQ(e.backend, "mpi");
  EXPECT_NE(e.steps[0].reason.find("(measured with async calls)"), std::string::npos)
      << e.steps[0].reason;
  // A table of one form decides for the other and says so.
  auto sync_only = std::make_shared<TuningTable>();
  sync_only->entries = {sync};
  const auto o =
      f.make("", sync_only)
          .explain(OpType::all_reduce, DType::f32, ReduceOp::sum, cpu, 64, {}, CallForm::async);
  EXPECT_EQ(o.backend, "gloo");
  EXPECT_NE(o.steps[0].reason.find(
                "(measured with sync calls; the table has no async entry for this op)"),
            std::string::npos)
      << o.steps[0].reason;
  // Rules come first whatever the form.
  EXPECT_EQ(f.make("all_reduce:*=gloo", table)
                .pick(OpType::all_reduce, DType::f32, ReduceOp::sum, cpu, 64, CallForm::async)
                .name(),
            "gloo");
}

// The two ends of a message select independently and must agree whatever their forms (a blocking
// send matched by an irecv, as MPI allows) and whichever end a rule or entry names: a table with
// send entries per form (`mcr tune --form both`), recv entries that differ, and rules naming one
// end only.
TEST(Selector, BothEndsOfAMessageSelectAlike) {
  Fixture f;
  const auto cpu = Device::Kind::cpu;
  auto table = std::make_shared<TuningTable>();
  TuningEntry send_sync{OpType::send, "any", 0, {{0, kMaxBytes, "mpi"}}};
  send_sync.form = "sync";
  TuningEntry send_async{OpType::send, "any", 0, {{0, kMaxBytes, "gloo"}}};
  send_async.form = "async";
  TuningEntry recv_async{OpType::recv, "any", 0, {{0, 1024, "gloo"}, {1025, kMaxBytes, "mpi"}}};
  recv_async.form = "async";
  table->entries = {send_sync, send_async, recv_async};
  auto s = f.make("", table);
  for (std::size_t bytes : {std::size_t{4}, std::size_t{1024}, std::size_t{1} << 20}) {
    for (OpType op : {OpType::send, OpType::recv}) {
      for (CallForm form : {CallForm::sync, CallForm::async}) {
        EXPECT_EQ(s.pick(op, DType::f32, ReduceOp::sum, cpu, bytes, form).name(), "mpi")
            << to_string(op) << " " << to_string(form) << " " << bytes << " bytes";
        EXPECT_EQ(s.explain(op, DType::f32, ReduceOp::sum, cpu, bytes, {}, form).backend, "mpi")
            << to_string(op) << " " << to_string(form) << " " << bytes << " bytes";
      }
    }
  }
  // A rule naming one end applies to both; the first of two conflicting ones decides for both.
  for (const char* rules : {"send:0-64K=gloo", "recv:0-64K=gloo", "recv:*=gloo;send:*=mpi"}) {
    auto r = f.make(rules, table);
    for (OpType op : {OpType::send, OpType::recv}) {
      for (CallForm form : {CallForm::sync, CallForm::async}) {
        EXPECT_EQ(r.pick(op, DType::f32, ReduceOp::sum, cpu, 4, form).name(), "gloo")
            << rules << ": " << to_string(op) << " " << to_string(form);
      }
      EXPECT_EQ(r.pick(op, DType::f32, ReduceOp::sum, cpu, 1 << 20).name(),
                std::string(rules).find('*') != std::string::npos ? "gloo" : "mpi")
          << rules << ": " << to_string(op) << " 1 MiB";
    }
  }
}
