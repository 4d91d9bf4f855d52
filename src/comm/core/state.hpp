// Internal state behind Communicator and Work, and the process-wide progress engine.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/tick_clock.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/observer.hpp"
#include "observe/flight_recorder.hpp"
#include "runtime/topology.hpp"
#include "select/selector.hpp"

namespace mcr::detail {

using Clock = std::chrono::steady_clock;

class CommState;
class Verifier;

/// The longest timeout the runtime waits: 100 years. A caller's "never" (a timeout of
/// milliseconds::max(), or of centuries) would overflow the clock when added to now, and the
/// operation would time out at once.
inline constexpr std::chrono::milliseconds kLongestTimeout = std::chrono::hours(24 * 365 * 100);

/// One operation in flight.
class WorkState {
 public:
  OpType op = OpType::barrier;
  std::uint64_t sequence = 0;
  Backend* backend = nullptr;
  std::unique_ptr<PendingOp> pending;
  std::chrono::milliseconds timeout{0};
  std::uint64_t start_tick = 0;  // TickClock reading at issue, taken only while observed
  bool done = false;
  bool failed = false;
  std::exception_ptr error;
  // The issuing communicator. Not an owning pointer: the communicator owns its operations in
  // flight (CommState::outstanding) and the user's Work handle owns the communicator (see
  // CommState::handle), so ownership has no cycle.
  CommState* owner = nullptr;
  // The user's Work handle was dropped before the operation was seen to finish: nobody will read
  // its outcome, so a failure is reported when the runtime finds it (CommState::reap/drain).
  bool orphaned = false;
  Device device{};
  // Observer record fields fixed at issue time.
  DType dtype = DType::u8;
  std::size_t count = 0;
  std::size_t bytes = 0;
  bool async = false;
  Clock::time_point issued_at{};  // async ops: Work::test() times out `timeout` after this

  /// One non-blocking completion check; records completion (and notifies the observer).
  /// `passive`: a look in passing (PendingOp::peek), not a wait.
  bool poll(bool passive = false);
  /// Polls until done, progressing every backend; raises TimeoutError after `timeout`.
  void wait_for(std::chrono::milliseconds timeout);
  /// Gives up on the operation after `limit`: abandons it, aborts the communicator and raises
  /// TimeoutError naming the op, this rank and the peers that have not reached it.
  [[noreturn]] void expire(std::chrono::milliseconds limit);
  /// Records a terminal state in the issuing communicator's flight recorder.
  void record_end(FlightState s) noexcept;
};

/// Process-wide progress: every wait loop calls progress_all() so that backends needing host calls
/// (MPI) advance while the caller waits on another backend. Used from one thread at a time.
class Engine {
 public:
  void register_backend(Backend* b);
  void unregister_backend(Backend* b) noexcept;
  /// Advances every backend that needs host progress and has pending work.
  void progress_all();
  /// Whether any backend needing host progress has an operation in flight (then no other library
  /// may block the calling thread).
  bool host_progress_pending() const noexcept { return host_pending_ > 0; }
  /// Before `b` starts the synchronous operation `args`: when `b` blocks the thread inside its
  /// library for it (a backend that needs host progress: MPI) while composed operations are in
  /// flight on this process, completes those first. Their remaining steps are issued only by this
  /// thread's progress() calls, which a blocked library call would withhold from peers waiting
  /// for them (docs/design.md, rule 7). Inline: every synchronous operation asks, and in most
  /// processes (one host, or no composed backend) the answer is no at the first test.
  void finish_composed_before_blocking(const Backend& b, const OpArgs& args) {
    if (composed_count_.load(std::memory_order_relaxed) == 0 || args.async ||
        !b.needs_host_progress_on(args.device.kind) || b.composes()) {
      return;
    }
    finish_composed_ops();
  }
  /// Completes every composed operation in flight on this process, progressing every backend.
  /// Called before anything that may block in a library regardless of the operation: a split.
  void finish_composed_ops();
  void op_started(const WorkState& w) noexcept;
  void op_finished(const WorkState& w) noexcept;

  /// Device fence (invariant 3): before `b` starts on `device`, drain in-flight work of every other
  /// device-blocking backend on that device, progressing everything while waiting: each op within
  /// its own timeout (`timeout` only for one without).
  void fence_device(const Backend& b, Device device, std::chrono::milliseconds timeout);
  void track_device_op(const std::shared_ptr<WorkState>& w);

  /// Every live communicator, so that finalize() can drain operations in flight on each of them.
  void add_comm(CommState* c);
  void remove_comm(CommState* c) noexcept;
  /// Drains every live communicator (CommState::drain) until `deadline`; the first unseen failure.
  std::exception_ptr drain_all(Clock::time_point deadline) noexcept;
  /// Every live communicator, in creation order.
  std::vector<CommState*> live_comms() const;

 private:
  mutable std::mutex comms_mu_;  // communicators may be created and freed on different threads
  std::vector<CommState*> comms_;
  std::vector<Backend*> host_progress_backends_;
  std::vector<Backend*> composed_backends_;     // guarded by comms_mu_
  std::atomic<std::size_t> composed_count_{0};  // its size, readable without the lock
  int host_pending_ = 0;
  std::vector<std::shared_ptr<WorkState>> device_ops_;  // in flight on device-blocking backends
};

/// Everything a communicator owns.
class CommState : public std::enable_shared_from_this<CommState> {
 public:
  int rank = 0;
  int size = 1;
  std::uint64_t id = 0;
  std::vector<int> world_ranks;                    // group rank -> world rank
  GroupTopology topology;                          // which members share a host
  std::vector<std::unique_ptr<Backend>> backends;  // default priority order
  std::vector<std::pair<std::string, std::string>> unusable;
  std::unique_ptr<Selector> selector;
  std::uint64_t next_sequence = 0;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<OpObserver> observer;
  // Set while the runtime issues operations of its own on this communicator (CommLog::collect()):
  // they are not told to the observer (issued without a start time, as before one was attached).
  bool unobserved = false;
  std::string aborted;  // non-empty once an operation timed out: later calls fail fast
  // abandon()ed by finalize() after a failure: its backends were told to abort too, so it forms
  // no group either (an aborted one still does: member_group).
  bool abandoned = false;
  std::uint64_t splits = 0;  // number of split()/new_group() calls, for rendezvous keys
  // member_group() calls so far per member list, for the members' rendezvous keys (groups.cpp).
  std::map<std::vector<int>, std::uint64_t> member_groups;
  // Async ops not yet seen complete, owned here so that an op whose Work handle was dropped still
  // completes (reap) and is drained before the backends go (drain, ~CommState).
  std::vector<std::shared_ptr<WorkState>> outstanding;
  std::unique_ptr<Verifier> verifier;  // MCR_VERIFY: destroyed before the backends it split
  FlightRecorder flight;  // the last MCR_FLIGHT_ENTRIES operations (flight_recorder.hpp)

  CommState();
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  /// Raises the reason once the communicator was aborted. Inline: every operation checks.
  void check_usable() const {
    if (!aborted.empty()) throw_aborted();
  }
  /// Marks the communicator unusable after an operation timed out (sync or async, raised by the
  /// runtime or by a backend): later calls fail fast instead of matching against a peer stuck in
  /// the timed-out operation. The first reason is kept.
  void abort(std::string_view reason);
  /// finalize() after a failure (failure.hpp): aborts this communicator, gives up on every
  /// operation in flight without waiting (each fails with an Error saying so) and tells each
  /// backend to abort. Never blocks.
  void abandon(std::string_view reason) noexcept;
  /// Issues a validated operation. Sync: completes it (fast path when allowed). Async: returns
  /// work.
  std::shared_ptr<WorkState> issue(OpArgs& args, const CallOptions& opts, std::size_t bytes);
  void notify(const WorkState& w) const noexcept;

  /// The pointer a Work handle holds for `w`: it owns `w` and this communicator (so the backends
  /// outlive every handle), and marks `w` orphaned when the last copy goes while `w` is still in
  /// flight.
  std::shared_ptr<WorkState> handle(std::shared_ptr<WorkState> w);
  /// Polls the oldest operations in flight without blocking and forgets the finished ones;
  /// reports (stderr) failures of orphaned operations. Called on every asynchronous issue.
  void reap() noexcept;
  /// Waits (progressing every backend) until each operation in flight finished, at most until
  /// `deadline`. Returns the first failure nobody has seen yet (an orphaned op, or one whose
  /// handle was never waited on), null when none; orphaned failures are also reported on stderr.
  std::exception_ptr drain(Clock::time_point deadline) noexcept;

 private:
  [[noreturn]] void throw_aborted() const;
};

/// The listener signal_operation_completed() calls (mcr::set_completion_signal).
void set_completion_listener(std::function<void()> listener);

/// The process's progress engine, made on first use and never destroyed: a program that exits
/// without finalize() tears the runtime (and its communicators, which unregister from the engine)
/// down among the static destructors, after an engine made later than the runtime would be gone.
/// Inline: every operation asks it.
inline Engine& engine() {
  // A union whose destructor does nothing: the engine is never destroyed, and its address stays a
  // constant (a leaked `*new Engine` would cost every call a load: the dispatch budget counts it).
  union NeverDestroyed {
    Engine engine;
    NeverDestroyed() : engine() {}
    ~NeverDestroyed() {}  // NOLINT(modernize-use-equals-default): must not destroy `engine`
  };
  static NeverDestroyed e;
  return e.engine;
}

}  // namespace mcr::detail
