// Work and the wait loop behind it: every wait progresses every backend that needs host progress,
// and gives up with TimeoutError instead of blocking forever.
#include <thread>

#include <fmt/format.h>

#include "mcr/errors.hpp"
#include "mcr/work.hpp"
#include "state.hpp"

namespace mcr::detail {

bool WorkState::poll() {
  if (done) return true;
  if (failed) std::rethrow_exception(error);
  bool finished = false;
  try {
    finished = pending->test();
  } catch (const TimeoutError& e) {
    // A backend that enforces the timeout itself (Gloo) reports it here: abort as for our own.
    failed = true;
    error = std::current_exception();
    engine().op_finished(*this);
    if (owner) owner->abort(e.what());
    throw;
  } catch (...) {
    failed = true;
    error = std::current_exception();
    engine().op_finished(*this);
    throw;
  }
  if (!finished) return false;
  done = true;
  engine().op_finished(*this);
  if (owner) owner->notify(*this);
  pending.reset();
  return true;
}

void WorkState::wait_for(std::chrono::milliseconds limit) {
  if (poll()) return;
  const auto began = Clock::now();
  const auto deadline = began + limit;
  // Spin briefly for latency, then yield, then sleep: ranks oversubscribing cores must not starve
  // the peer they are waiting for.
  for (std::uint64_t spins = 1;; ++spins) {
    engine().progress_all();
    if (poll()) return;
    if (spins < 256) continue;
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (now - began < std::chrono::milliseconds(5)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  failed = true;
  std::string name(backend->name());
  auto msg = fmt::format("{} (sequence #{}) on backend '{}' did not complete within {} ms",
                         to_string(op), sequence, name, limit.count());
  error = std::make_exception_ptr(TimeoutError(msg, std::string(to_string(op)), sequence, name));
  if (pending) pending->abandon();
  engine().op_finished(*this);
  if (owner) owner->abort(msg);
  std::rethrow_exception(error);
}

}  // namespace mcr::detail

namespace mcr {

bool Work::test() {
  if (state_ == nullptr) return true;
  // A caller polling test() is waiting too: keep every backend moving, or a peer blocked on an MPI
  // operation that needs this rank's progress would never let this operation finish.
  if (!state_->done) detail::engine().progress_all();
  return state_->poll();
}

void Work::wait() {
  if (state_ == nullptr) return;
  state_->wait_for(state_->timeout);
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (state_ == nullptr) return;
  state_->wait_for(timeout);
}

void Work::synchronize(void* stream) {
  if (state_ == nullptr || state_->done) return;
  if (state_->pending && state_->pending->stream_wait(stream)) return;
  wait();
}

OpType Work::op() const {
  return state_ ? state_->op : OpType::barrier;
}
std::uint64_t Work::sequence() const {
  return state_ ? state_->sequence : 0;
}
std::string_view Work::backend() const {
  return state_ && state_->backend ? state_->backend->name() : std::string_view{};
}

}  // namespace mcr
