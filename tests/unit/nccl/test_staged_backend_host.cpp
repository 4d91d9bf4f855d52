// Host-side: the staging wrapper's capability answers and its pass-through of CPU work, with a fake
// inner backend (no GPU needed).
#include <gtest/gtest.h>

#include "core/backend.hpp"
#include "core/state.hpp"
#include "device/device_runtime.hpp"

namespace mcr::detail {
namespace {

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(bool cuda_aware, int rank = 1, int size = 3, bool host_progress = false)
      : cuda_aware_(cuda_aware), host_progress_(host_progress), rank_(rank), size_(size) {}
  std::string_view name() const noexcept override { return "fake"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  bool blocks_device() const noexcept override { return cuda_aware_; }
  std::size_t max_count() const noexcept override { return 12345; }
  bool needs_host_progress() const noexcept override { return host_progress_; }

  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override {
    if (op != OpType::all_reduce) return Support::no("fake: only all_reduce");
    if (dtype == DType::bf16) return Support::no("fake: no bf16");
    if (device == Device::Kind::cuda && !cuda_aware_) return Support::no("fake: host memory only");
    (void)reduce;
    return Support::yes("native");
  }
  std::unique_ptr<PendingOp> start(const OpArgs& args) override {
    started.push_back(args);
    return nullptr;
  }
  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t) override {
    if (members.front() != rank_) return nullptr;
    return std::make_unique<FakeBackend>(cuda_aware_, 0, static_cast<int>(members.size()));
  }

  std::vector<OpArgs> started;

 private:
  bool cuda_aware_;
  bool host_progress_;
  int rank_;
  int size_;
};

TEST(StagedBackend, HostOnlyBackendIsStagedForDeviceTensors) {
  auto staged = device::with_staging(std::make_unique<FakeBackend>(false));
  const Support s =
      staged->supports(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cuda);
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.how, "staged");
  // What the inner backend cannot do even on the host stays refused, with its reason.
  const Support bf =
      staged->supports(OpType::all_reduce, DType::bf16, ReduceOp::sum, Device::Kind::cuda);
  EXPECT_FALSE(bf.ok);
  EXPECT_EQ(bf.why, "fake: no bf16");
  EXPECT_EQ(staged->supports(OpType::gather, DType::f32, ReduceOp::sum, Device::Kind::cuda).why,
            "fake: only all_reduce");
  // CPU answers are the inner backend's.
  EXPECT_EQ(staged->supports(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cpu).how,
            "native");
}

TEST(StagedBackend, CudaAwareBackendPassesThrough) {
  auto staged = device::with_staging(std::make_unique<FakeBackend>(true));
  const Support s =
      staged->supports(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cuda);
  EXPECT_TRUE(s.ok);
  EXPECT_EQ(s.how, "native");
  EXPECT_TRUE(staged->blocks_device());
  // Nothing is staged, so it needs host progress only if the inner backend does.
  EXPECT_FALSE(staged->needs_host_progress());
}

TEST(StagedBackend, ForwardsIdentityAndCpuOperations) {
  auto inner = std::make_unique<FakeBackend>(false);
  FakeBackend* raw = inner.get();
  auto staged = device::with_staging(std::move(inner));
  EXPECT_EQ(staged->name(), "fake");
  EXPECT_EQ(staged->rank(), 1);
  EXPECT_EQ(staged->size(), 3);
  EXPECT_EQ(staged->max_count(), 12345u);
  EXPECT_FALSE(staged->blocks_device());
  EXPECT_TRUE(staged->needs_host_progress());  // staged ops advance only when polled
  // ... but only those: its operations on host memory are the inner backend's own.
  EXPECT_TRUE(staged->needs_host_progress_on(Device::Kind::cuda));
  EXPECT_FALSE(staged->needs_host_progress_on(Device::Kind::cpu));

  std::vector<float> in(4, 1.0f), out(4);
  OpArgs args;
  args.op = OpType::all_reduce;
  args.dtype = DType::f32;
  args.count = 4;
  args.in = in.data();
  args.out = out.data();
  EXPECT_EQ(staged->start(args), nullptr);
  ASSERT_EQ(raw->started.size(), 1u);
  EXPECT_EQ(raw->started[0].in, in.data());  // CPU tensors are not copied
  EXPECT_EQ(raw->started[0].out, out.data());
}

// The runtime's count of operations that need host progress, which decides whether a wait may
// sleep in its library: a host-memory operation of a staged host-only backend (Gloo on a machine
// with a GPU) must not count, a staged one must, and an MPI-like inner backend counts for both.
TEST(StagedBackend, OnlyStagedOperationsCountAsPendingHostProgress) {
  Engine engine;
  // Whether an operation of `b` on `device` in flight counts as pending host progress.
  auto counts = [&](Backend& b, Device device) {
    WorkState w;
    w.backend = &b;
    w.device = device;
    engine.op_started(w);
    const bool pending = engine.host_progress_pending();
    engine.op_finished(w);
    EXPECT_FALSE(engine.host_progress_pending());
    return pending;
  };
  auto staged = device::with_staging(std::make_unique<FakeBackend>(false));
  EXPECT_FALSE(counts(*staged, Device::cpu()));
  EXPECT_TRUE(counts(*staged, Device::cuda(0)));
  auto mpi_like = device::with_staging(std::make_unique<FakeBackend>(false, 1, 3, true));
  EXPECT_TRUE(mpi_like->needs_host_progress_on(Device::Kind::cpu));
  EXPECT_TRUE(counts(*mpi_like, Device::cpu()));
}

TEST(StagedBackend, SplitWrapsTheChildAndNonMembersGetNothing) {
  auto staged = device::with_staging(std::make_unique<FakeBackend>(false));
  auto child = staged->split({1, 2}, 7);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->size(), 2);
  EXPECT_EQ(child->supports(OpType::all_reduce, DType::f32, ReduceOp::sum, Device::Kind::cuda).how,
            "staged");
  EXPECT_EQ(staged->split({0, 2}, 8), nullptr);
}

}  // namespace
}  // namespace mcr::detail
