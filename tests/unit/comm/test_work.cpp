// Work's answers for an operation that has failed: every way of waiting for it raises its error;
// and the device fence, which waits for other backends' device operations, is not failed by one,
// and waits for each within its own timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/backend.hpp"
#include "core/state.hpp"
#include "mcr/comm/work.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

// A device library's pending op: it orders a stream after itself, whatever became of it.
class StreamOrderedOp final : public PendingOp {
 public:
  bool test() override { return false; }
  bool stream_wait(void*) override {
    ++stream_waits;
    return true;
  }
  int stream_waits = 0;
};

std::shared_ptr<WorkState> failed_op(StreamOrderedOp*& pending) {
  auto state = std::make_shared<WorkState>();
  auto op = std::make_unique<StreamOrderedOp>();
  pending = op.get();
  state->pending = std::move(op);  // kept after a failure, as expire() and poll() keep it
  state->failed = true;
  state->error = std::make_exception_ptr(BackendError("peer lost"));
  return state;
}

TEST(Work, SynchronizeRaisesTheErrorOfAFailedOperation) {
  StreamOrderedOp* pending = nullptr;
  Work w(failed_op(pending));
  EXPECT_THROW(w.synchronize(nullptr), BackendError);
  EXPECT_EQ(pending->stream_waits, 0) << "the stream was ordered after an op that failed";
  EXPECT_THROW(w.wait(), BackendError);
  EXPECT_THROW((void)w.test(), BackendError);
}

class FakeBackend final : public Backend {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  std::unique_ptr<PendingOp> start(const OpArgs&) override { return nullptr; }
  std::unique_ptr<Backend> split(const std::vector<int>&, std::uint64_t) override {
    return nullptr;
  }
};

// Another backend's operation in flight on cuda:0, which the fence of `e` waits for.
std::shared_ptr<WorkState> device_op(Engine& e, Backend& backend,
                                     std::unique_ptr<PendingOp> pending) {
  auto op = std::make_shared<WorkState>();
  op->backend = &backend;
  op->device = Device::cuda(0);
  op->pending = std::move(pending);
  e.track_device_op(op);
  return op;
}

class LostPeerOp final : public PendingOp {
 public:
  bool test() override { throw BackendError("another communicator lost a peer"); }
};

// A call on one communicator first waits for another backend's operations on the same device
// (a device library may not start beside them). One of those failing is its own waiter's error:
// raised here, it ended this call on this rank alone, after its peers had agreed to start it.
TEST(Engine, TheDeviceFenceIsNotFailedByAnotherOperationsFailure) {
  FakeBackend other;
  FakeBackend mine;
  Engine e;
  auto op = device_op(e, other, std::make_unique<LostPeerOp>());
  EXPECT_NO_THROW(e.fence_device(mine, Device::cuda(0), std::chrono::milliseconds(100)));
  EXPECT_TRUE(op->failed);  // its owner still learns of it
  EXPECT_THROW(Work(op).wait(), BackendError);
}

// Completes on its first test() after `ready`.
class SlowOp final : public PendingOp {
 public:
  explicit SlowOp(std::chrono::steady_clock::time_point ready) : ready_(ready) {}
  bool test() override { return std::chrono::steady_clock::now() >= ready_; }

 private:
  std::chrono::steady_clock::time_point ready_;
};

// The fence waits for another communicator's operation within that operation's own timeout: with
// the caller's shorter one it expired the operation, which aborted its communicator ("did not
// complete within 50 ms", though its own limit was 10 s).
TEST(Engine, TheDeviceFenceWaitsWithinTheOtherOperationsOwnTimeout) {
  FakeBackend other;
  FakeBackend mine;
  Engine e;
  auto op = device_op(
      e, other,
      std::make_unique<SlowOp>(std::chrono::steady_clock::now() + std::chrono::milliseconds(300)));
  op->timeout = std::chrono::seconds(10);
  EXPECT_NO_THROW(e.fence_device(mine, Device::cuda(0), std::chrono::milliseconds(50)));
  EXPECT_TRUE(op->done);
  EXPECT_FALSE(op->failed);
}

}  // namespace
}  // namespace mcr::detail
