// Work's answers for an operation that has failed: every way of waiting for it raises its error.
#include <gtest/gtest.h>

#include <stdexcept>

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

}  // namespace
}  // namespace mcr::detail
