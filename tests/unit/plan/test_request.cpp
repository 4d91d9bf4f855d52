// A planner request: pinned and open dimensions become one layout or a search space; the pricing
// options are checked and converted; the communication model is assembled from table files.
#include <gtest/gtest.h>

#include <filesystem>

#include "mcr/errors.hpp"
#include "mcr/plan/request.hpp"
#include "test_helpers.hpp"

namespace mcr::plan {
namespace {

using test::round_system;

TEST(PlanRequest, OptionsConvertMegabytesAndTheGradientDtype) {
  PlanRequest r;
  r.dp_bucket_mb = 40;
  r.optimizer_bytes = 8;
  r.grad_dtype = "fp32";
  r.moe_glu_clamp = true;
  const PlanOptions o = to_plan_options(r);
  EXPECT_DOUBLE_EQ(o.dp_bucket_bytes, 40e6);
  EXPECT_DOUBLE_EQ(o.optimizer_bytes_per_param, 8);
  EXPECT_DOUBLE_EQ(o.grad_bytes_per_param, 4);
  ASSERT_TRUE(o.grad_dtype.has_value()) << "--grad-dtype's dtype not carried to the lookup";
  EXPECT_EQ(*o.grad_dtype, codesign::DType::fp32);
  EXPECT_TRUE(o.moe_glu_clamp);
}

TEST(PlanRequest, BadOptionsNameTheirField) {
  PlanRequest r;
  r.dp_bucket_mb = 0;
  try {
    (void)to_plan_options(r);
    FAIL() << "a zero bucket was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("request.dp_bucket_mb 0: must be a positive", 0), 0u)
        << e.what();
  }
  r.dp_bucket_mb = 25;
  r.optimizer_bytes = -1;
  EXPECT_THROW((void)to_plan_options(r), InvalidArgument);
}

TEST(PlanRequest, UnsetDimensionsKeepTheLayoutDefaults) {
  PlanRequest r;
  r.tp = 4;
  r.micro_batch = 2;
  r.recompute = "full";
  r.fp8 = "delayed";
  r.dp_overlap = false;
  const Layout l = to_layout(r);
  EXPECT_EQ(l.tp, 4);
  EXPECT_EQ(l.micro_batch, 2);
  EXPECT_EQ(l.recompute, Recompute::full);
  EXPECT_EQ(l.fp8, Fp8::delayed);
  EXPECT_FALSE(l.dp_overlap);
  EXPECT_EQ(l.pp, 1);
  EXPECT_EQ(l.dp, 0);
  EXPECT_EQ(l.gpus, 0);
  EXPECT_EQ(l.interleave, 1);
}

TEST(PlanRequest, GivenDimensionsPinTheSearch) {
  PlanRequest r;
  r.tp = 2;
  r.zero = 1;
  r.distributed_optimizer = true;
  const SearchSpace s = to_search_space(r, round_system(4, 8));
  EXPECT_EQ(s.gpus, 32);  // the whole system when --gpus is not given
  EXPECT_EQ(s.tp, std::vector<int>{2});
  EXPECT_EQ(s.zero, std::vector<int>{1});
  EXPECT_EQ(s.distributed_optimizer, std::vector<bool>{true});
  EXPECT_TRUE(s.pp.empty());
  EXPECT_TRUE(s.sequence_parallel.empty());
  r.gpus = 16;
  EXPECT_EQ(to_search_space(r, round_system(4, 8)).gpus, 16);
  // tp, pp and dp all pinned and no --gpus: the layout's own GPUs, as a single plan takes them
  // (the search ran on the whole system and refused every layout for its dp).
  PlanRequest pinned;
  pinned.tp = 2;
  pinned.pp = 2;
  pinned.dp = 4;
  EXPECT_EQ(to_search_space(pinned, round_system(4, 8)).gpus, 16);
  pinned.cp = 2;
  EXPECT_EQ(to_search_space(pinned, round_system(4, 8)).gpus, 32);
  pinned.dp = 1 << 20;  // more than the system: the whole system, and the search says why
  EXPECT_EQ(to_search_space(pinned, round_system(4, 8)).gpus, 32);
}

TEST(PlanRequest, CommModelLoadsTablesThenRules) {
  TuningTable t;
  TuningEntry e;
  e.op = OpType::all_reduce;
  e.dtype_class = "float";
  e.group_size = 2;
  e.ranges = {{0, 1023, "mpi"}, {1024, kMaxBytes, "gloo"}};
  t.entries.push_back(e);
  for (std::size_t bytes : {16u, 1024u}) {
    t.samples.push_back({OpType::all_reduce, "float", 2, bytes, "mpi", 1.0});
    t.samples.push_back({OpType::all_reduce, "float", 2, bytes, "gloo", 5.0});
  }
  const auto path = std::filesystem::temp_directory_path() / "mcr_plan_request_table.json";
  t.save(path.string());
  codesign::DeviceSpec cpu;
  cpu.vendor = "cpu";
  const Placement p{2, 2, 1};
  const auto tabled = make_comm_model(round_system(1, 2), cpu, {"intra=" + path.string()}, "");
  EXPECT_EQ(tabled.cost(Collective::all_reduce, 16, p, DType::f32).backend, "mpi");
  const auto ruled = make_comm_model(round_system(1, 2), cpu, {path.string()}, "all_reduce:*=gloo");
  EXPECT_EQ(ruled.cost(Collective::all_reduce, 16, p, DType::f32).backend, "gloo");
  const auto plain = make_comm_model(round_system(1, 2), cpu, {}, "");
  EXPECT_EQ(plain.cost(Collective::all_reduce, 16, p, DType::f32).backend, "alpha-beta");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mcr::plan
