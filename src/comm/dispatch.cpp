// Dispatch: a validated operation is given a backend (selection), a sequence number and a timeout,
// started, and either completed here (synchronous) or handed back as Work. The one place where a
// communicator is aborted after a timeout (CommState::abort).
#include <fmt/format.h>

#include "mcr/errors.hpp"
#include "state.hpp"
#include "verify.hpp"
#include "watchdog.hpp"

namespace mcr::detail {

CommState::~CommState() {
  // Drain async work the user dropped, so no backend is destroyed under an operation in flight.
  for (auto& w : outstanding) {
    try {
      if (!w->done && !w->failed) w->wait_for(timeout);
    } catch (
        ...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; timeouts are final
    }
  }
  outstanding.clear();
  for (auto& b : backends)
    engine().unregister_backend(b.get());
}

void CommState::check_usable() const {
  if (!aborted.empty()) throw Error(aborted);
}

void CommState::abort(std::string_view reason) {
  // The first timeout is the cause; later ones are its consequences and would hide it.
  if (aborted.empty()) aborted = fmt::format("communicator aborted: {}", reason);
}

void CommState::notify(const WorkState& w) const noexcept {
  if (!observer) return;
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
               ? selector->pick(args.op, args.dtype, reduce, args.device.kind, bytes)
               : selector->pick_override(opts.backend, args.op, args.dtype, reduce,
                                         args.device.kind, bytes);
  };
  // MCR_VERIFY: ranks compare the operation (and the backend each selected) before any starts.
  detail::Backend& b = verifier ? verifier->pick(*this, args, opts, pick) : pick();
  const auto limit = opts.timeout.count() > 0 ? opts.timeout : timeout;
  args.sequence = next_sequence++;
  args.timeout = limit;
  args.may_block = !args.async && !engine().host_progress_pending();
  if (b.blocks_device() && args.device.is_cuda()) engine().fence_device(b, args.device, limit);

  const std::uint64_t start = observer ? TickClock::now() : 0;
  flight.issued(args.sequence, args.op, args.dtype, args.count, args.root, args.async, b.name(),
                bytes);
  auto& dog = Watchdog::instance();
  dog.arm(args.op_name, args.sequence, b.name(), limit, &flight);
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
    return w;
  }
  w->pending = std::move(pending);
  w->issued_at = Clock::now();
  w->keep_alive = shared_from_this();
  engine().op_started(*w);
  if (b.blocks_device()) engine().track_device_op(w);
  std::erase_if(outstanding, [](const auto& o) { return o->done || o->failed; });
  outstanding.push_back(w);
  return w;
}

}  // namespace mcr::detail
