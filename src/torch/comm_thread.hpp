// The communication thread: the thread of the process that calls into mcr.
//
// mcr's threading contract (docs/design.md, "Threads") lets one thread at a time use a communicator
// and its Work handles. torch calls a process group from the Python thread, from autograd threads
// and from future callbacks, so mcr calls (init, group creation, each operation, finalize) are
// handed to this thread, as torch-ucc and oneCCL's bindings do. The thread issues queued
// operations in the order they were posted (the order every rank must agree on), polls every
// operation in flight and completes it even when nobody waits.
//
// One shortcut: while the thread is idle (nothing queued, nothing in flight), an operation is
// issued by the thread that posts it, which then polls it briefly (until it completes, when the
// caller is going to wait for it anyway: set_inline_waiter) and completes it itself when it
// finished; otherwise it leaves it in flight for the communication thread. A small synchronous
// operation then costs no hand-off between threads. Who calls mcr is decided by one mutex
// (`own_`): the communication thread holds it while it has work and is not asleep, a poster for
// the microseconds of its shortcut. Posting order is kept because a poster takes the shortcut only
// while it holds the queue's lock, sees the queue empty, and gets `own_` without waiting.
//
// A second one: a thread that waits for an operation (Work::wait) does the communication thread's
// work itself until that operation completes, when it can take `own_` without waiting (the
// communication thread lets go of it whenever it sleeps). It issues what is queued, polls
// everything in flight, runs completions and sleeps where the thread would; so a completion
// reported by Gloo's threads wakes the waiter directly, not the communication thread, which then
// wakes the waiter. This is the wait torch's own gloo backend makes in the caller's thread.
//
// A third, where ranks share cores (the poster does not poll): a Gloo send or receive that its
// poster issued itself is parked, left in flight without a look and without waking the
// communication thread; the thread that then waits on its handle lets go of `own_` and blocks in
// Gloo's own wait (mcr::Work::library_wait), so Gloo's I/O thread wakes it directly, with no pool
// thread between them. A handle polled or chained on instead hands the parked operation to the
// communication thread (take_over_parked), as does any later post.
//
// Completions run torch's future callbacks, and a callback may post an operation and wait for it
// (DDP's PowerSGD and quantization hooks), or wait for another operation in flight. So whoever
// runs completions lets go of `own_` first, and the work is not left undone meanwhile: a waiter's
// or a relief's goes to the communication thread, and the communication thread's to a relief, a
// thread that takes its work over while its callbacks run (at once where they posted, else after
// a millisecond) and gives it back when they return. A relief whose own callbacks block is
// replaced in turn, so callbacks that wait nest as deep as they need.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <mcr/comm/work.hpp>

namespace mcr::torch_ext {

/// MCR_TORCH_CALLER_POLL_BYTES's default: on one host an MPI all_reduce of up to 64 KiB finishes
/// within the caller's 50 µs poll (40-43 µs at 64 KiB, 2 ranks: docs/performance/torch.md); a
/// larger one cannot (nor does Gloo's at any size, whose poll then costs its caller 50 µs).
inline constexpr std::size_t kDefaultCallerPollMaxBytes = 64 * 1024;

/// One asynchronous operation as the communication thread sees it.
struct PostedOp {
  /// Starts the operation (an mcr i* call) and returns its handle. Runs on the thread that holds
  /// the right to call mcr. Kept until the operation completed: its captures own the buffers the
  /// runtime reads and writes.
  std::function<mcr::Work()> issue;
  /// Runs once the operation completed (nullptr) or failed: on the communication thread, or on the
  /// posting thread when its shortcut saw the operation finish.
  std::function<void(std::exception_ptr)> complete;
  /// After this long the operation fails with mcr::TimeoutError. `issue` passes it to mcr, whose
  /// Work::test enforces it; the thread keeps a backstop a second later.
  std::chrono::milliseconds timeout{0};
  /// The posting thread waits for the operation right after posting it (a synchronous
  /// torch.distributed call): when it issues the operation itself (the shortcut), it waits for it
  /// there (CommThread::set_inline_waiter) instead of handing it over after a short while, which
  /// saves two thread wake-ups per call.
  bool caller_waits = false;
  /// How long a posting thread that issued the operation itself (and does not wait for it) polls
  /// it before leaving it to the communication thread. A small collective whose peers are in step
  /// completes within a few microseconds; 50 µs also bounds what an asynchronous call costs its
  /// caller. 0: one look. Where ranks share cores, polling takes the core a peer or the library's
  /// own thread needs (process_group.hpp, waiter_spins()); a large operation cannot finish within
  /// the poll, which would only hold up its caller (DDP's backward pass: caller_poll_for()).
  std::chrono::microseconds caller_poll{50};
  /// The handle the caller will wait on (a WorkMCR), or nullptr.
  const void* waiter = nullptr;
  /// Where ranks share cores and the library offers a wait of its own (mcr::Work::library_wait:
  /// Gloo's sends and receives), an operation the poster issues itself (with a `waiter`) is
  /// parked: left in flight with no look and without waking the communication thread, for the
  /// wait on the handle to claim the library's wait (drive_until). take_over_parked() hands it to
  /// the communication thread.
  bool park_for_waiter = false;
};

class CommThread {
 public:
  static CommThread& instance();

  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  /// Queues an operation, or issues it on the calling thread while the communication thread is
  /// idle (above); never waits for other operations. Safe from any thread, including a future
  /// callback that runs on the communication thread itself.
  void post(PostedOp op);

  /// Allows the shortcut above. Off until the runtime is up, and wherever the thread that calls mcr
  /// must not change (mcr::any_thread_may_call()) or MCR_TORCH_INLINE=0 asks for it off.
  void set_caller_issue(bool on) noexcept { caller_issue_.store(on, std::memory_order_relaxed); }
  /// The one thread whose synchronous calls, issued by the shortcut, poll their operation alone,
  /// holding the right to call mcr, until it completes or another thread posts (then they go on
  /// as waiters, which issue that post): the thread that brought the runtime up, whose calls are
  /// the hot path. Other threads' synchronous calls, and calls on a library with a wait of its own
  /// or that signals its completions (Gloo), do the communication thread's work (issue_here).
  void set_inline_waiter(std::thread::id id) noexcept {
    inline_waiter_.store(id, std::memory_order_relaxed);
  }
  /// The largest operation (bytes of its output tensors) that a posting thread which issued it
  /// itself polls (PostedOp::caller_poll); MCR_TORCH_CALLER_POLL_BYTES, default 64 KiB.
  void set_caller_poll_max_bytes(std::size_t bytes) noexcept {
    caller_poll_max_bytes_.store(bytes, std::memory_order_relaxed);
  }
  /// Allows reliefs (above), which call mcr from threads other than the communication thread: off
  /// where the thread that calls mcr must not change (mcr::any_thread_may_call()). Without them a
  /// completion callback that waits on the communication thread waits for its operation's timeout.
  void set_reliefs_allowed(bool on) noexcept {
    reliefs_allowed_.store(on, std::memory_order_relaxed);
  }
  std::size_t caller_poll_max_bytes() const noexcept {
    return caller_poll_max_bytes_.load(std::memory_order_relaxed);
  }

  /// Operations posted so far, how many a posting thread issued itself, and how many of those it
  /// also completed (the rest the communication thread finished).
  /// `driven_by_waiter`: waits in which the waiting thread did the communication thread's work.
  /// `waited_in_library`: of those, waits in which the waiter blocked in the library's own wait.
  /// `relieved`: times a relief took the communication thread's work over while it ran callbacks.
  struct Counts {
    std::uint64_t posted = 0, issued_by_caller = 0, completed_by_caller = 0, driven_by_waiter = 0,
                  waited_in_library = 0, relieved = 0;
  };
  Counts counts() const noexcept {
    return {posted_.load(std::memory_order_relaxed),
            issued_by_caller_.load(std::memory_order_relaxed),
            completed_by_caller_.load(std::memory_order_relaxed),
            driven_by_waiter_.load(std::memory_order_relaxed),
            waited_in_library_.load(std::memory_order_relaxed),
            relieved_.load(std::memory_order_relaxed)};
  }

  /// The waiting caller's shortcut (above): does the communication thread's work on this thread
  /// until `done()` holds or `until` passes, and returns whether `done()` held. Returns false at
  /// once, having done nothing, where it may not: the shortcuts are off, this is the communication
  /// thread or a completion running inside such a wait, or another thread holds the right to call
  /// mcr (the caller then waits as before, and that thread completes the operation).
  /// `waiter` (PostedOp::waiter of the operation awaited): when that operation is alone in flight
  /// with nothing queued, and `until` is no shorter than its timeout, this thread lets go of the
  /// right to call mcr and blocks in the library's own wait (mcr::Work::library_wait), woken by the
  /// library's thread as a plain gloo program is; then completes the operation if it can take the
  /// right back at once (else whoever holds it does).
  bool drive_until(const std::function<bool()>& done, std::chrono::steady_clock::time_point until,
                   const void* waiter = nullptr);

  /// Hands operations parked for their waiter (PostedOp::waiter) to the communication thread: for
  /// a handle polled or chained on instead of waited on. Cheap when nothing is parked; any thread.
  void take_over_parked();

  /// Runs `task` on the communication thread without waiting for it. Returns false (and drops the
  /// task) once the thread has shut down.
  bool post_task(std::function<void()> task);

  /// Runs `fn` on the communication thread after everything posted before it has been issued, and
  /// returns its result (or rethrows its exception). Must not be called from the thread itself.
  template <class F>
  auto call(F&& fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    std::packaged_task<R()> task(std::forward<F>(fn));
    auto result = task.get_future();
    run_task([&task] { task(); });
    return result.get();
  }

  /// Asks the thread to stop once it is idle: it issues everything queued and waits for every
  /// operation in flight, including those their completion callbacks post meanwhile, in posted
  /// order; at the first moment nothing is queued or in flight (decided under the queue's lock,
  /// so no post can slip between the check and the stop) later posts fail at once. Then it runs
  /// `at_exit` (mcr::finalize) on the thread, and this call joins it. Every wait in between is
  /// bounded by the operations' timeouts. With `abandon` (the process exits on an error of its
  /// own) it stops at its next round instead: what is queued is not issued, what is in flight is
  /// left to finalize, which abandons it, and no completion runs. Idempotent; a no-op on the thread
  /// itself.
  void shutdown(std::function<void()> at_exit, bool abandon = false);
  /// This is the communication thread or one of its reliefs (whose posts are queued, and which
  /// must not block on a call of their own).
  bool on_thread() const noexcept;
  /// This thread holds the right to call mcr for the communication thread's work (not while it
  /// runs completion callbacks): it may call mcr directly.
  bool holds_right_to_call() const noexcept;

 private:
  CommThread();
  ~CommThread();

  struct InFlight {
    mcr::Work work;
    std::function<mcr::Work()> issue;  // owns the operation's buffers
    std::function<void(std::exception_ptr)> complete;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    bool caller_waits = false;
    std::chrono::microseconds caller_poll{0};
    const void* waiter = nullptr;
    bool park_for_waiter = false;
  };
  struct Item {
    PostedOp op;                 // when op.issue is set
    std::function<void()> task;  // otherwise
    bool awaited = false;        // a caller blocks on the task's result (run_task)
  };

  /// What one round of the thread's work found (work_round()).
  enum class Round { progressed, waiting, idle };
  /// Who does a round: the communication thread, a relief, or a waiter (drive_until).
  enum class Driver { primary, relief, waiter };
  /// An operation that completed or failed, its completion not yet run.
  struct Finished {
    std::function<void(std::exception_ptr)> complete;
    std::function<mcr::Work()> owner;  // owns the buffers, past the copy-back in complete()
    std::exception_ptr error;
    bool issued = true;  // failed after it was issued: the library may still use the buffers
  };

  void run_task(std::function<void()> task);
  /// Wakes whoever waits for work: the idle communication thread, and any sleeper between
  /// completions. Called after the change, without mu_.
  void announce();
  /// Work left in flight goes to the communication thread (or, while it runs callbacks, a relief).
  void hand_over();
  /// Wakes a relief, starting one where none is free. `urgent`: work was posted or handed over
  /// while the communication thread runs callbacks; else the relief leaves it a grace first.
  void call_relief(bool urgent);
  void relief_loop();
  /// A relief's turn: the communication thread's work while it runs callbacks.
  void relieve();
  /// Runs the completions in ready_, one at a time and each without own_ (above), telling whoever
  /// must take the work over meanwhile. Returns whether `own` is held again (a waiter's try may
  /// fail). A relief stops once the communication thread is back.
  bool run_ready(std::unique_lock<std::mutex>& own, Driver who);
  void run_item(Item& item);
  void loop();
  void wait_for_work();
  bool run_until_idle(std::unique_lock<std::mutex>& own);
  /// By whoever holds own_: issues everything queued, polls everything in flight and runs the
  /// completions (run_ready: a waiter's `own` may be let go of on return). `idle`: there was
  /// nothing to do (checked under the queue's lock; `may_stop` then also decides the stop).
  Round work_round(bool may_stop, std::unique_lock<std::mutex>& own, Driver who);
  /// Between rounds where nothing moved: sleeps until a completion signal or a post where every
  /// operation in flight signals its completion, else yields or sleeps briefly. `release` is let
  /// go of while sleeping (the communication thread's own_, for a waiting caller to take).
  /// `seen`: the caller's last seen count of completion signals.
  void pause(std::chrono::steady_clock::time_point idle_since,
             std::chrono::steady_clock::time_point until, std::unique_lock<std::mutex>* release,
             std::uint64_t& seen);
  void issue_here(PostedOp& op, std::unique_lock<std::mutex> own);
  /// drive_until's work by the holder of `own`, which it lets go of before it returns.
  bool drive(std::unique_lock<std::mutex> own, const std::function<bool()>& done,
             std::chrono::steady_clock::time_point until, const void* waiter);
  void issue(PostedOp& op);
  bool poll_in_flight();
  static bool poll_one(InFlight& f, std::exception_ptr& error);
  /// Every operation in flight reports its completion from a library thread (Gloo's).
  bool in_flight_signal_completion();
  /// Sleeps until a completion signal not yet `seen`, or a post, or a backstop of a few ms, or
  /// `until`; then updates `seen`.
  void sleep_until_signalled(std::chrono::steady_clock::time_point until, std::uint64_t& seen);
  /// drive_until's wait in the library (above), by the holder of `own`.
  enum class LibraryWait { none, waited, lost_own };
  LibraryWait wait_in_library(const void* waiter, std::chrono::steady_clock::time_point until,
                              std::unique_lock<std::mutex>& own);

  std::mutex own_;              // held by the thread that calls mcr (above); guards in_flight_
  std::mutex mu_;               // guards the queue and the flags below
  std::condition_variable cv_;  // work posted or handed over; the stop
  std::condition_variable signal_cv_;  // that, or a completion signal (sleep_until_signalled)
  std::deque<Item> queue_;
  std::atomic<bool> queued_{false};  // work for the thread; read without the lock while spinning
  std::atomic<bool> caller_issue_{false};
  std::atomic<std::thread::id> inline_waiter_{};  // set_inline_waiter()
  std::atomic<bool> reliefs_allowed_{false};      // set at init()
  std::atomic<std::size_t> caller_poll_max_bytes_{kDefaultCallerPollMaxBytes};
  std::atomic<std::uint64_t> posted_{0}, issued_by_caller_{0}, completed_by_caller_{0},
      driven_by_waiter_{0}, waited_in_library_{0}, relieved_{0};
  // An operation is parked for its waiter (PostedOp::waiter): in flight, the communication thread
  // not told. Set by the parking poster (holding own_); cleared by whoever takes it over.
  std::atomic<bool> parked_{false};
  bool handed_over_ = false;  // a poster left an operation in flight for the thread to finish
  // Completions signalled so far. Each sleeper (the communication thread, a waiter doing its
  // work) sleeps until the count differs from the one it last saw: a flag that one of them reset
  // would lose the other's wake-up.
  std::uint64_t signals_ = 0;
  std::uint64_t thread_seen_ = 0;  // the communication thread's last seen count (its own)
  // shutdown() was called: stop at the next idle moment. Not a queued item: an item would be
  // taken in one batch with operations posted after it, and the stop would overtake them.
  bool shutdown_requested_ = false;
  std::function<void()> at_exit_;  // set with shutdown_requested_
  bool abandon_ = false;           // set with shutdown_requested_: stop without draining
  // The same, read without the lock by threads that hold own_ while they wait (a waiter doing the
  // thread's work, the initialising thread's poll): they let go of it for the thread to stop.
  std::atomic<bool> abandoning_{false};
  std::exception_ptr exit_error_;  // what at_exit_ raised, for shutdown() to rethrow
  bool stopping_ = false;          // idle after the request: posts fail from here on
  bool stopped_ = false;
  std::deque<InFlight> in_flight_;
  std::deque<Finished> ready_;  // completions not yet run (run_ready); guarded by own_
  std::thread thread_;

  // Reliefs (above). The communication thread runs completion callbacks: set and read seq_cst
  // (run_ready, announce).
  std::atomic<bool> primary_in_callbacks_{false};
  std::atomic<std::uint64_t> callback_rounds_{0};  // its batches of callbacks so far
  // Under mu_:
  std::uint64_t relief_calls_ = 0;        // calls not yet seen by a relief
  bool relief_urgent_ = false;            // one of them was urgent (call_relief)
  std::size_t reliefs_in_callbacks_ = 0;  // reliefs running completion callbacks
  bool relief_starting_ = false;          // a relief was started and has not yet looked for calls
  bool reliefs_stop_ = false;             // shutdown(): the reliefs end
  std::vector<std::thread> reliefs_;
  std::condition_variable relief_cv_;  // a call for a relief, or the reliefs' end
};

}  // namespace mcr::torch_ext
