// Work and the wait loop behind it: every wait progresses every backend that needs host progress,
// and gives up with TimeoutError instead of blocking forever.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/state.hpp"
#include "mcr/comm/work.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {

bool WorkState::poll(bool passive) {
  if (done) return true;
  if (failed) std::rethrow_exception(error);
  bool finished = false;
  try {
    finished = passive ? pending->peek() : pending->test();
  } catch (const TimeoutError& e) {
    // A backend that enforces the timeout itself (Gloo) reports it here: abort as for our own, and
    // name this rank and the peers that are behind as our own timeouts do.
    failed = true;
    record_end(FlightState::timed_out);
    const std::string msg = owner ? e.what() + timeout_context(owner->flight, sequence) : e.what();
    error = std::make_exception_ptr(TimeoutError(msg, e.op(), e.sequence(), e.backend()));
    engine().op_finished(*this);
    if (owner) owner->abort(msg);
    std::rethrow_exception(error);
  } catch (const BackendError& e) {
    // A library failed in the middle of the operation (a peer was lost, a connection reset): what
    // its peers did is unknown, so the communicator is aborted as after a timeout.
    failed = true;
    record_end(FlightState::failed);
    error = std::current_exception();
    engine().op_finished(*this);
    if (owner) owner->abort(e.what());
    throw;
  } catch (...) {
    failed = true;
    record_end(FlightState::failed);
    error = std::current_exception();
    engine().op_finished(*this);
    throw;
  }
  if (!finished) return false;
  done = true;
  record_end(FlightState::completed);
  engine().op_finished(*this);
  if (owner) owner->notify(*this);
  pending.reset();
  return true;
}

void WorkState::wait_for(std::chrono::milliseconds limit) {
  if (done) return;
  if (failed) std::rethrow_exception(error);
  const auto began = Clock::now();
  const auto deadline = began + limit;
  // Where no backend needs this thread's progress, a library that progresses on its own may put
  // the caller to sleep until it is done, as its own blocking call would: polling would take the
  // core from the library's threads that do the work (docs/gloo-backend.md).
  if (pending && !engine().host_progress_pending() && pending->block(limit) && poll()) return;
  if (poll()) return;
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
  expire(limit);
}

void WorkState::record_end(FlightState s) noexcept {
  if (owner) owner->flight.ended(sequence, s);
}

void WorkState::expire(std::chrono::milliseconds limit) {
  failed = true;
  record_end(FlightState::timed_out);
  std::string name(backend->name());
  auto msg = fmt::format("{} (sequence #{}) on backend '{}' did not complete within {} ms",
                         to_string(op), sequence, name, limit.count());
  if (owner) msg += timeout_context(owner->flight, sequence);
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
  if (state_->poll()) return true;
  // Polling is waiting too: once the op's timeout has passed since it was issued, give up as
  // wait() would, or a loop over test() could spin forever on a peer that never comes.
  if (state_->timeout.count() > 0 && detail::Clock::now() - state_->issued_at >= state_->timeout) {
    state_->expire(state_->timeout);
  }
  return false;
}

void Work::wait() {
  if (state_ == nullptr) return;
  state_->wait_for(state_->timeout);
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (state_ == nullptr) return;
  state_->wait_for(std::min(timeout, detail::kLongestTimeout));
}

void Work::synchronize(void* stream) {
  if (state_ == nullptr || state_->done) return;
  // A failed op keeps its pending op (expire, a failed poll), and a device library would still
  // order the stream after it: the stream would go on with outputs that were never written.
  if (state_->failed) std::rethrow_exception(state_->error);
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

bool Work::signals_completion() const {
  if (state_ == nullptr || state_->done || state_->failed || !state_->pending) return true;
  return state_->pending->signals_completion();
}

std::function<void()> Work::library_wait() const {
  if (state_ == nullptr || state_->done || state_->failed || !state_->pending) return {};
  if (detail::engine().host_progress_pending()) return {};
  return state_->pending->library_wait();
}

void set_completion_signal(std::function<void()> signal) {
  detail::set_completion_listener(std::move(signal));
}

}  // namespace mcr
