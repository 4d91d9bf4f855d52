// Dispatch: a validated operation is given a backend (selection), a sequence number and a timeout,
// started, and either completed here (synchronous) or handed back as Work. The one place where a
// communicator is aborted after a timeout (CommState::abort).
#include <algorithm>

#include <fmt/format.h>

#include "core/failure.hpp"
#include "core/log.hpp"
#include "core/state.hpp"
#include "core/watchdog.hpp"
#include "mcr/errors.hpp"
#include "observe/verify.hpp"

namespace mcr::detail {

CommState::CommState() {
  engine().add_comm(this);
}

CommState::~CommState() {
  // Only operations whose Work handles were dropped can be left (a handle owns its communicator):
  // drain them, so no backend is destroyed under an operation in flight. Their failures are
  // reported by drain(); a destructor has nobody to raise them to.
  (void)drain(Clock::now() + timeout);
  outstanding.clear();
  engine().remove_comm(this);
  for (auto& b : backends)
    engine().unregister_backend(b.get());
  // Composed backends come last and hold sub-communicators split off the flat backends before
  // them: they go first, as the verifier, which split them too, goes before them all.
  verifier.reset();
  while (!backends.empty())
    backends.pop_back();
}

namespace {

// What a Work handle owns: the operation and its communicator. A Work never points into the
// communicator (and so at its backends) without keeping it alive, and the communicator never owns
// a handle: dropping every handle and every Communicator frees the group.
struct WorkHandle {
  std::shared_ptr<CommState> comm;
  std::shared_ptr<WorkState> work;
  WorkHandle(std::shared_ptr<CommState> c, std::shared_ptr<WorkState> w)
      : comm(std::move(c)), work(std::move(w)) {}
  WorkHandle(const WorkHandle&) = delete;
  WorkHandle& operator=(const WorkHandle&) = delete;
  ~WorkHandle() {
    if (!work->done && !work->failed) work->orphaned = true;
  }
};

// One line on stderr, always: the failure of an operation nobody waits for must not pass silently.
void report_orphan_failure(const WorkState& w) noexcept {
  try {
    std::rethrow_exception(w.error);
  } catch (const std::exception& e) {
    log_line(
        fmt::format("{} (sequence #{}) on backend '{}' failed after its Work handle was "
                    "dropped: {}",
                    to_string(w.op), w.sequence, w.backend->name(), e.what()));
  } catch (...) {  // NOLINT(bugprone-empty-catch): only mcr errors are stored; nothing to add
  }
}

}  // namespace

std::shared_ptr<WorkState> CommState::handle(std::shared_ptr<WorkState> w) {
  auto h = std::make_shared<WorkHandle>(shared_from_this(), std::move(w));
  WorkState* raw = h->work.get();
  return {std::move(h), raw};  // aliasing: points at the op, owns the pair
}

void CommState::reap() noexcept {
  // Operations finish roughly in issue order: poll from the oldest until one is still running, so
  // a long queue costs one test per issue.
  for (auto& w : outstanding) {
    if (w->done || w->failed) continue;
    try {
      // Handles still held will be waited on; the orphaned ones nobody else observes.
      if (!w->poll(/*passive=*/!w->orphaned)) break;
    } catch (...) {  // NOLINT(bugprone-empty-catch): poll() stored the error in w
    }
  }
  std::erase_if(outstanding, [](const std::shared_ptr<WorkState>& w) {
    if (!w->done && !w->failed) return false;
    if (w->failed && w->orphaned) report_orphan_failure(*w);
    return true;
  });
}

std::exception_ptr CommState::drain(Clock::time_point deadline) noexcept {
  std::exception_ptr first;
  for (auto& w : outstanding) {
    if (w->done || w->failed) continue;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      w->wait_for(std::max(left, std::chrono::milliseconds(1)));
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  // Every failed operation nobody will wait for is reported, those that had failed before the
  // drain (in another communicator's device fence, say) too.
  std::erase_if(outstanding, [](const std::shared_ptr<WorkState>& w) {
    if (!w->done && !w->failed) return false;
    if (w->failed && w->orphaned) report_orphan_failure(*w);
    return true;
  });
  return first;
}

void CommState::throw_aborted() const {
  throw Error(aborted);
}

void CommState::abort(std::string_view reason) {
  // The first timeout is the cause; later ones are its consequences and would hide it.
  if (aborted.empty()) aborted = fmt::format("communicator aborted: {}", reason);
  note_failure(reason);
}

void CommState::abandon(std::string_view reason) noexcept {
  try {
    abort(reason);
    abandoned = true;
    const auto error = std::make_exception_ptr(Error(fmt::format(
        "abandoned by mcr::finalize() after a failure of this process ({}); its buffers may still "
        "be written by the library until the process exits",
        reason)));
    for (auto& w : outstanding) {
      if (w->done || w->failed) continue;
      w->failed = true;
      w->error = error;
      w->record_end(FlightState::failed);
      if (w->pending) w->pending->abandon();
      engine().op_finished(*w);
    }
    outstanding.clear();
    for (auto& b : backends)
      b->abort();
  } catch (...) {  // NOLINT(bugprone-empty-catch): never throws; what is left is kept, not waited
  }
}

void CommState::notify(const WorkState& w) const noexcept {
  // An operation issued before the observer was attached has no start time (taken only while
  // observed): left out, where its record spanned the clock's whole epoch.
  if (!observer || w.start_tick == 0) return;
  OpRecord r;
  r.sequence = w.sequence;
  r.op = w.op;
  r.async = w.async;
  r.backend = w.backend->name();
  r.dtype = w.dtype;
  r.count = w.count;
  r.bytes = w.bytes;
  r.group_id = id;
  r.group_rank = rank;
  r.group_size = size;
  r.global_rank = world_ranks[static_cast<std::size_t>(rank)];
  const auto span = TickClock::to_steady(w.start_tick, TickClock::now());
  r.start = span.start;
  r.end = span.end;
  observer->on_complete(r);
}

std::shared_ptr<WorkState> CommState::issue(OpArgs& args, const CallOptions& opts,
                                            std::size_t bytes) {
  check_usable();
  const ReduceOp reduce = is_reduction(args.op) ? args.reduce : ReduceOp::sum;
  auto pick = [&]() -> detail::Backend& {
    return opts.backend.empty()
               ? selector->pick(args.op, args.dtype, reduce, args.device.kind, bytes,
                                args.async ? CallForm::async : CallForm::sync)
               : selector->pick_override(opts.backend, args.op, args.dtype, reduce,
                                         args.device.kind, bytes);
  };
  // Verification (MCR_VERIFY): ranks compare the operation (and the backend each selected) before
  // any starts; by default only a signature's first call.
  detail::Backend& b =
      verifier && !verifier->skips(args) ? verifier->pick(*this, args, opts, pick) : pick();
  // The communicator's timeout is bounded where it is set (set_timeout); a call's here.
  const auto limit = opts.timeout.count() > 0 ? std::min(opts.timeout, kLongestTimeout) : timeout;
  args.sequence = next_sequence++;
  args.timeout = limit;
  args.may_block = !args.async && !engine().host_progress_pending();
  try {
    // The device test first: it spares host operations a virtual call.
    if (args.device.is_cuda() && b.blocks_device()) engine().fence_device(b, args.device, limit);
    engine().finish_composed_before_blocking(b, args);
  } catch (...) {
    flight.failed_before_issue(args.sequence);  // verified, so in the record already
    throw;
  }

  const std::uint64_t start = observer && !unobserved ? TickClock::now() : 0;
  const std::string_view backend_name = b.name();  // static storage; asked once
  flight.issued(args.sequence, args.op, args.dtype, args.count, args.root, args.async, backend_name,
                bytes);
  auto& dog = Watchdog::instance();
  dog.arm(args.op_name, args.sequence, backend_name, limit, &flight);
  std::unique_ptr<PendingOp> pending;
  try {
    pending = b.start(args);
  } catch (const TimeoutError& e) {
    // A backend that blocks and enforces the timeout itself (Gloo): add who timed out and who is
    // behind, as for the runtime's own timeouts.
    dog.disarm();
    flight.ended(args.sequence, FlightState::timed_out);
    const std::string msg = e.what() + timeout_context(flight, args.sequence);
    abort(msg);
    throw TimeoutError(msg, e.op(), e.sequence(), e.backend());
  } catch (const BackendError& e) {
    dog.disarm();
    flight.ended(args.sequence, FlightState::failed);
    abort(e.what());  // as in WorkState::poll: the peers' state is unknown
    throw;
  } catch (...) {
    dog.disarm();
    flight.ended(args.sequence, FlightState::failed);
    throw;
  }
  dog.disarm();
  if (pending) {
    flight.started(args.sequence);
  } else {
    flight.ended(args.sequence, FlightState::completed);
  }

  auto fill = [&](WorkState& w) {
    w.op = args.op;
    w.sequence = args.sequence;
    w.backend = &b;
    w.timeout = limit;
    w.start_tick = start;
    w.owner = this;
    w.device = args.device;
    w.dtype = args.dtype;
    w.count = args.count;
    w.bytes = bytes;
    w.async = args.async;
  };
  if (!args.async) {
    // Synchronous: no allocation; the state lives on this stack frame.
    if (!pending && !observer) return nullptr;  // the fast path: completed inside start()
    WorkState w;
    fill(w);
    if (!pending) {
      w.done = true;
      notify(w);
      return nullptr;
    }
    w.pending = std::move(pending);
    engine().op_started(w);
    w.wait_for(limit);
    return nullptr;
  }
  auto w = std::make_shared<WorkState>();
  fill(*w);
  if (!pending) {
    w->done = true;
    notify(*w);
    return handle(std::move(w));
  }
  w->pending = std::move(pending);
  w->issued_at = Clock::now();
  engine().op_started(*w);
  if (b.blocks_device()) engine().track_device_op(w);
  reap();
  outstanding.push_back(w);
  return handle(std::move(w));
}

}  // namespace mcr::detail
