// Options of the sweep, the auto comparison and tuning (their checks name flag, value and rule),
// and the comparison's choice of the best backend and of its extra rounds.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "mcr/bench.hpp"
#include "mcr/errors.hpp"

using namespace mcr;
using namespace mcr::bench;

namespace {

// Runs `fn`, which must throw InvalidArgument, and returns its message.
template <class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgument";
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

SweepOptions valid_sweep() {
  SweepOptions o;
  o.sizes = {4, 64};
  return o;
}

BackendTiming timing(std::string backend, double seconds, std::vector<double> reps = {}) {
  BackendTiming t;
  t.backend = std::move(backend);
  t.seconds = seconds;
  t.repetitions = std::move(reps);
  return t;
}

}  // namespace

TEST(Options, PlacementNamesTheField) {
  EXPECT_EQ(parse_placement("out"), Placement::out);
  EXPECT_EQ(parse_placement("in"), Placement::in);
  EXPECT_EQ(parse_placement("both"), Placement::both);
  const auto m = message_of([] { parse_placement("sideways"); });
  EXPECT_TRUE(contains(m, "sweep.place 'sideways': must be out, in or both")) << m;
}

TEST(Options, SweepChecksNameFieldValueAndRule) {
  const std::vector<std::string> usable{"mpi", "gloo"};
  EXPECT_NO_THROW(check_sweep_options(valid_sweep(), usable, 4));
  auto o = valid_sweep();
  o.iterations = 0;
  auto m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "sweep.iterations 0: at least one iteration is required")) << m;
  o = valid_sweep();
  o.warmup = -1;
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "sweep.warmup -1: must be >= 0")) << m;
  o = valid_sweep();
  o.backends = {"auto", "ucx"};
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "sweep.backends 'ucx': not usable here (usable: auto, mpi, gloo)")) << m;
  o = valid_sweep();
  o.sizes.clear();
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "options.sizes: at least one message size is required")) << m;
  o = valid_sweep();
  o.ops.clear();
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "options.ops: at least one operation is required")) << m;
  o = valid_sweep();
  o.dtypes.clear();
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "options.dtypes: at least one element type is required")) << m;
  // The root and the reduce operator of every op, before any group runs: before, a sweep of
  // all_gather then all_reduce with --reduce prod measured all of all_gather and then stopped.
  o = valid_sweep();
  o.ops = {OpType::all_gather, OpType::all_reduce};
  o.reduce = ReduceOp::prod;
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m,
                       "options.reduce prod: the benchmark verifies sum, min and max only "
                       "(all_reduce reduces)"))
      << m;
  o = valid_sweep();
  o.ops = {OpType::all_gather, OpType::broadcast};
  o.root = 5;
  m = message_of([&] { check_sweep_options(o, usable, 4); });
  EXPECT_TRUE(contains(m, "options.root 5: must be a rank in [0, 4) (broadcast has a root)")) << m;
  o.ops = {OpType::all_gather};  // no rooted op: the root is not used
  EXPECT_NO_THROW(check_sweep_options(o, usable, 4));
}

TEST(Options, CompareChecksNameFieldValueAndRule) {
  CompareOptions o;
  o.sizes = {64};
  EXPECT_NO_THROW(check_compare_options(o, 4));
  auto bad = o;
  bad.repetitions = 0;
  auto m = message_of([&] { check_compare_options(bad, 4); });
  EXPECT_TRUE(contains(m, "compare.repetitions 0: at least one repetition is required")) << m;
  bad = o;
  bad.precision = -0.5;
  m = message_of([&] { check_compare_options(bad, 4); });
  EXPECT_TRUE(contains(m, "compare.precision -0.5: must be >= 0")) << m;
  bad = o;
  bad.extra_budget_s = -1;
  m = message_of([&] { check_compare_options(bad, 4); });
  EXPECT_TRUE(contains(m, "compare.extra_budget_s -1: must be >= 0 seconds")) << m;
  bad = o;
  bad.warmup = -5;  // read as 1 before
  m = message_of([&] { check_compare_options(bad, 4); });
  EXPECT_TRUE(contains(m, "compare.warmup -5: must be >= 0 calls")) << m;
  for (const double ratio :
       {std::numeric_limits<double>::quiet_NaN(), 0.0, std::numeric_limits<double>::infinity()}) {
    bad = o;
    bad.min_ratio = ratio;  // NaN: no point met it, and every one was said not to
    m = message_of([&] { check_compare_options(bad, 4); });
    EXPECT_TRUE(contains(m, "compare.min_ratio")) << m;
    EXPECT_TRUE(contains(m, "must be a finite number > 0")) << m;
  }
  bad = o;
  bad.ops = {OpType::reduce};
  bad.root = -1;
  m = message_of([&] { check_compare_options(bad, 4); });
  EXPECT_TRUE(contains(m, "options.root -1: must be a rank in [0, 4)")) << m;
}

TEST(Options, TuneChecksNameFieldValueAndRule) {
  const std::vector<std::string> usable{"mpi", "gloo"};
  TuneOptions o;
  o.sizes = {64};
  EXPECT_NO_THROW(check_tune_options(o, usable));
  auto bad = o;
  bad.backends = {"auto"};  // tuning compares backends: automatic selection is not one
  auto m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.backends 'auto': not usable here (usable: mpi, gloo)")) << m;
  // Before a communicator exists (mcr tune checks its flags before init()): all but the backends.
  EXPECT_NO_THROW(check_tune_flags(bad));
  bad = o;
  bad.hysteresis = 1.5;
  m = message_of([&] { check_tune_flags(bad); });
  EXPECT_TRUE(contains(m, "tune.hysteresis 1.5: must be in [0, 1)")) << m;
  bad = o;
  bad.repetitions = 0;
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.repetitions 0: must be >= 1")) << m;
  bad = o;
  bad.budget_ms = 0;
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.budget_ms 0: must be > 0")) << m;
  bad = o;
  bad.hysteresis = 1;
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.hysteresis 1: must be in [0, 1)")) << m;
  bad = o;
  bad.in_flight = {4, 0};
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.in_flight 0: must be in [1, 1000] operations")) << m;
  bad.in_flight = {4, 16, 4};
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.in_flight 4: given twice")) << m;
  bad.in_flight = {};
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "tune.in_flight: name at least one")) << m;
  bad.in_flight = {16, 4};  // any order
  EXPECT_NO_THROW(check_tune_options(bad, usable));
  bad = o;
  bad.dtypes = {DType::f32, DType::i32};  // one per class: two entries
  EXPECT_NO_THROW(check_tune_options(bad, usable));
  bad.dtypes = {DType::f32, DType::i32, DType::bf16};  // bf16 would share f32's entry
  m = message_of([&] { check_tune_options(bad, usable); });
  EXPECT_TRUE(contains(m, "options.dtypes fp32, bf16: both of class 'float'")) << m;
}

TEST(Options, DefaultsMatchTheCommandLine) {
  // The documented defaults of `mcr bench`, `--compare-auto` and `mcr tune` (docs/bench.md).
  const SweepOptions s;
  EXPECT_EQ(s.ops, std::vector<OpType>{OpType::all_reduce});
  EXPECT_EQ(s.backends, std::vector<std::string>{"auto"});
  EXPECT_EQ(s.iterations, 20);
  EXPECT_EQ(s.warmup, 5);
  EXPECT_DOUBLE_EQ(s.min_time_s, 0.01);
  const CompareOptions c;
  EXPECT_EQ(c.ops.size(), 5u);
  EXPECT_EQ(c.repetitions, 9);
  EXPECT_DOUBLE_EQ(c.min_ratio, 0.95);
  EXPECT_DOUBLE_EQ(c.precision, 0.015);
  EXPECT_DOUBLE_EQ(c.extra_budget_s, 4.0);
  const TuneOptions t;
  EXPECT_EQ(t.ops, benchmark_ops());
  EXPECT_DOUBLE_EQ(t.hysteresis, 0.03);
  EXPECT_EQ(t.repetitions, 5);
  EXPECT_DOUBLE_EQ(t.budget_ms, 10.0);
}

TEST(Ops, SendRecvNeedsTwoRanks) {
  EXPECT_TRUE(skip_single_rank_p2p(1, OpType::send));
  EXPECT_TRUE(skip_single_rank_p2p(1, OpType::recv));
  EXPECT_FALSE(skip_single_rank_p2p(2, OpType::send));
  EXPECT_FALSE(skip_single_rank_p2p(1, OpType::all_reduce));
}

TEST(Compare, BestSingleIgnoresAutoAndUnsupportedBackends) {
  std::vector<BackendTiming> res{timing("", 1.0), timing("mpi", 3.0), timing("gloo", 2.0),
                                 timing("nccl", 0.5)};
  res[3].supported = false;
  EXPECT_EQ(best_single(res), 2u);  // auto (index 0) is never a single backend
  res[1].supported = res[2].supported = false;
  EXPECT_EQ(best_single(res), 0u);
  EXPECT_EQ(best_single({timing("", 1.0)}), 0u);
}

// A backend whose check found wrong values is fast because broken: never the baseline.
TEST(Compare, BestSingleSkipsABackendWithWrongResults) {
  std::vector<BackendTiming> res{timing("", 1.0), timing("mpi", 3.0), timing("gloo", 2.0)};
  res[2].wrong = 7;
  EXPECT_EQ(best_single(res), 1u);
}

TEST(Compare, PointNamesItsBestBackend) {
  ComparePoint p;
  p.timings = {timing("", 1e-6), timing("mpi", 2e-6)};
  EXPECT_EQ(p.best_backend(), "-");
  EXPECT_DOUBLE_EQ(p.best_seconds(), 0.0);
  p.best = 1;
  EXPECT_EQ(p.best_backend(), "mpi");
  EXPECT_DOUBLE_EQ(p.best_seconds(), 2e-6);
}

TEST(Compare, InterleavingUsesTheDocumentedBudgets) {
  CompareOptions o;
  o.warmup = 0;  // at least one warmup iteration: the probe must not time first-call costs
  o.repetitions = 3;
  o.extra_budget_s = 2.5;
  const auto io = compare_interleaved_options(o);
  EXPECT_EQ(io.warmup, 1);
  EXPECT_EQ(io.repetitions, 3);
  EXPECT_DOUBLE_EQ(io.repetition_budget_s, kCompareRepetitionBudgetS);
  EXPECT_EQ(io.max_iterations, kCompareMaxIterations);
  EXPECT_DOUBLE_EQ(io.point_budget_s, kComparePointBudgetS);
  EXPECT_EQ(io.max_repetitions, kCompareMaxRepetitions);
  EXPECT_DOUBLE_EQ(io.extra_budget_s, 2.5);
  EXPECT_EQ(io.extra_batch, kCompareExtraBatch);
  ASSERT_TRUE(io.more_rounds);
}

TEST(Compare, ExtraRoundsForAutoAndTheContendersUntilTheRatioIsPrecise) {
  CompareOptions o;
  o.precision = 0.015;
  const auto more = compare_interleaved_options(o).more_rounds;
  // Noisy pairs: best/auto varies by +-20%, so the interval is wide. gloo (within 10% of mpi, the
  // best) may still be best and keeps going; nccl (50% slower) does not.
  const std::vector<double> noisy{1.0, 1.2, 0.8, 1.1, 0.9, 1.15, 0.85};
  std::vector<BackendTiming> res{timing("", 1.0, noisy), timing("mpi", 1.0, {1, 1, 1, 1, 1, 1, 1}),
                                 timing("gloo", 1.05), timing("nccl", 1.5)};
  EXPECT_EQ(more(res), (std::vector<std::size_t>{0, 1, 2}));
  // Equal ratios in every round: known exactly, no more rounds.
  res[0].repetitions = {1, 1, 1, 1, 1, 1, 1};
  EXPECT_TRUE(more(res).empty());
  // No single backend ran: nothing to compare with.
  res[1].supported = res[2].supported = res[3].supported = false;
  EXPECT_TRUE(more(res).empty());
}

// The best is a backend left out of the extra rounds (its 7 repetitions against auto's 10): no
// further round pairs it with auto, so none is run (they were, until the extra budget was spent).
TEST(Compare, NoExtraRoundsWhenTheBestIsNoLongerMeasured) {
  CompareOptions o;
  o.precision = 0.015;
  const auto more = compare_interleaved_options(o).more_rounds;
  const std::vector<double> noisy{1.0, 1.2, 0.8, 1.1, 0.9, 1.15, 0.85, 1.3, 0.7, 1.2};
  std::vector<BackendTiming> res{timing("", 1.0, noisy), timing("mpi", 1.1, noisy),
                                 timing("gloo", 0.9, {1, 1, 1, 1, 1, 1, 1})};
  EXPECT_TRUE(more(res).empty());
  res[2].repetitions = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};  // measured in every round: goes on
  EXPECT_EQ(more(res), (std::vector<std::size_t>{0, 2}));
}

TEST(Provenance, CommandLineNamesThisProgram) {
  EXPECT_TRUE(contains(command_line(), "bench_unit_tests")) << command_line();
}

TEST(TuneOptionsTest, CallFormsAndPlacementParse) {
  EXPECT_EQ(parse_call_forms("sync"), std::vector<CallForm>{CallForm::sync});
  EXPECT_EQ(parse_call_forms("async"), std::vector<CallForm>{CallForm::async});
  EXPECT_EQ(parse_call_forms("both"), (std::vector<CallForm>{CallForm::sync, CallForm::async}));
  EXPECT_EQ(message_of([] { (void)parse_call_forms("all"); }),
            "tune.forms 'all': must be sync, async or both (entries are kept per form)");
  EXPECT_FALSE(parse_tune_placement("out"));
  EXPECT_TRUE(parse_tune_placement("in"));
  EXPECT_TRUE(contains(message_of([] { (void)parse_tune_placement("both"); }),
                       "tune.in_place 'both': must be out or in"));
}

TEST(SweepOptionsTest, ReduceOperatorsParse) {
  EXPECT_EQ(parse_reduce("sum"), ReduceOp::sum);
  EXPECT_EQ(parse_reduce("min"), ReduceOp::min);
  EXPECT_EQ(parse_reduce("max"), ReduceOp::max);
  EXPECT_EQ(message_of([] { (void)parse_reduce("median"); }),
            "options.reduce 'median': unknown reduce operator (use sum, min, max)");
}
