// The communication thread: issue in posted order, poll everything in flight, complete futures;
// and the posting thread's shortcut while the communication thread is idle.
#include "comm_thread.hpp"

#include <pthread.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mcr/comm/memory.hpp>
#include <mcr/errors.hpp>

namespace mcr::torch_ext {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kShutDownMessage =
    "mcr: the communication thread has shut down (mcr.torch.shutdown() or exit)";

// This thread is a waiter doing the communication thread's work (drive_until): it holds own_, so
// it must neither take the posting shortcut (try_lock on a mutex it holds) nor block on a call.
thread_local bool t_driving = false;
// This thread is the communication thread or one of its reliefs: what it posts is queued, and it
// must not block on a call of its own.
thread_local bool t_comm = false;
// This thread holds own_ for a round of the communication thread's work (not while the completions
// it collected run): it may call mcr directly.
thread_local bool t_holds_own = false;

// How long the communication thread may run completion callbacks while other operations wait
// before a relief takes over its work (CommThread::relieve). Callbacks are short as a rule (a
// division, a copy); a millisecond keeps the relief out of their way, and bounds what one that
// blocks holds up.
constexpr auto kReliefGrace = std::chrono::milliseconds(1);

// The issue function of an operation that failed after it was issued (a timeout, a library error):
// it owns the tensors the operation reads and writes, and the library may still write into them
// when a late peer arrives, whatever the caller dropped (the tensors, the group). Kept until the
// process exits, as the runtime keeps its own buffers of abandoned operations; it may hold the last
// reference to the group's communicator, which is then never destroyed either.
void keep_until_exit(std::function<mcr::Work()> owner) noexcept {
  static auto& mutex = *new std::mutex;
  static auto& kept = *new std::vector<std::function<mcr::Work()>>;
  try {
    std::lock_guard lock(mutex);
    kept.push_back(std::move(owner));
  } catch (...) {  // out of memory: leak it rather than free what a library may still write
    try {
      (void)new std::function<mcr::Work()>(std::move(owner));
    } catch (...) {  // NOLINT(bugprone-empty-catch): nothing is left to hold it with
    }
  }
}

}  // namespace

CommThread& CommThread::instance() {
  // Never destroyed: a static destructor would run after Python finalised and after torch's own
  // statics; shutdown() (registered with Python's atexit) stops the thread instead.
  static CommThread* t = new CommThread();
  return *t;
}

CommThread::CommThread() {
  // Before the thread exists: the heap a thread allocates from is chosen at its first allocation,
  // and only the main heap serves blocks of 64 MiB or more without mapping them afresh each time.
  mcr::apply_memory_policy();
  // Gloo's threads report each completion: the thread then sleeps between them instead of polling
  // (the instance is never destroyed, so the signal may keep `this`).
  mcr::set_completion_signal([this] {
    {
      std::lock_guard lock(mu_);
      ++signals_;
    }
    // Only sleepers that wait for completions: an idle communication thread stays asleep.
    signal_cv_.notify_all();
  });
  thread_ = std::thread([this] { loop(); });
}

CommThread::~CommThread() {
  if (thread_.joinable()) thread_.detach();
}

bool CommThread::on_thread() const noexcept {
  return t_comm;
}

bool CommThread::holds_right_to_call() const noexcept {
  return t_holds_own;
}

void CommThread::post(PostedOp op) {
  posted_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    op.complete(std::make_exception_ptr(mcr::Error(kShutDownMessage)));
    return;
  }
  // The shortcut: nothing queued ahead of this operation and nobody calling mcr (the communication
  // thread holds own_ while it issues or polls; with operations in flight the shortcut only
  // issues and hands over). try_to_lock, never a wait: this thread holds mu_, and the
  // communication thread takes mu_ while holding own_.
  if (caller_issue_.load(std::memory_order_relaxed) && queue_.empty() && !t_comm && !t_driving) {
    std::unique_lock own(own_, std::try_to_lock);
    if (own.owns_lock()) {
      lock.unlock();
      issue_here(op, std::move(own));
      return;
    }
  }
  queue_.push_back(Item{std::move(op), {}});
  queued_.store(true);  // seq_cst: announce() then reads primary_in_callbacks_ (run_ready)
  lock.unlock();
  announce();
}

void CommThread::issue_here(PostedOp& op, std::unique_lock<std::mutex> own) {
  const bool alone = in_flight_.empty();  // else: earlier operations are left to the thread
  issued_by_caller_.fetch_add(1, std::memory_order_relaxed);
  mcr::Work work;
  try {
    work = op.issue();
  } catch (...) {
    own.unlock();  // complete() may run callbacks that post: never while holding own_
    op.complete(std::current_exception());
    return;
  }
  InFlight f{
      std::move(work),   std::move(op.issue), std::move(op.complete), Clock::now() + op.timeout,
      op.timeout,        op.caller_waits,     op.caller_poll,         op.waiter,
      op.park_for_waiter};
  // Not with completions left to run (ready_, guarded by own_): spinning holds own_, so they would
  // wait behind this operation, and another thread may wait for one of them before it posts what
  // a peer needs to get to this operation. drive() below runs them.
  if (alone && ready_.empty() && f.caller_waits && !f.work.library_wait() &&
      std::this_thread::get_id() == inline_waiter_.load(std::memory_order_relaxed)) {
    // The thread that brought the runtime up, whose synchronous calls are the hot path, polls its
    // operation alone, as Work::wait does (every backend progressed, spinning, then yielding,
    // then sleeping), without the waiter's rounds over everything in flight. It holds own_
    // meanwhile, so it stops as soon as another thread's post is queued and goes on as a waiter
    // below, which issues that post: an operation of this thread may need a peer to get past a
    // call that another thread of this rank has posted (rank 1 receives what a helper thread of
    // rank 0 sends, then joins rank 0's all_reduce). An operation with a wait of the library's
    // own (a Gloo send or receive: drive() blocks in it without own_) or that signals its
    // completion (a Gloo collective, after one look) is waited for as a waiter does: polling
    // would take the core from the library's threads, and a wait inside the library could not
    // see a post.
    std::exception_ptr error;
    bool finished = false;
    const auto began = Clock::now();
    for (std::uint64_t spins = 1;; ++spins) {
      try {
        finished = f.work.test();  // raises at the operation's timeout
      } catch (...) {
        error = std::current_exception();
        finished = true;
      }
      if (finished || queued_.load(std::memory_order_acquire) ||
          abandoning_.load(std::memory_order_acquire) || f.work.signals_completion()) {
        break;
      }
      if (spins < 256) continue;
      if (Clock::now() - began < std::chrono::milliseconds(5)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    if (finished) {
      own.unlock();
      completed_by_caller_.fetch_add(1, std::memory_order_relaxed);
      f.complete(error);  // f.issue, which owns the buffers, outlives the copy-back
      if (error) keep_until_exit(std::move(f.issue));
      return;
    }
  }
  if (alone && f.caller_waits) {
    // Any other thread that waits anyway does the thread's work here until its operation
    // completes (drive(), as its Work's wait would), issuing what other threads post meanwhile. A
    // wait on this operation alone would hold own_ while another thread's post stays queued
    // behind it: where two threads call synchronous collectives on two groups and the ranks reach
    // them in different orders, each rank's issued call would wait for a peer whose call is
    // queued, both until their timeouts.
    auto done = std::make_shared<std::atomic<bool>>(false);
    f.complete = [complete = std::move(f.complete), done](std::exception_ptr error) {
      complete(std::move(error));
      done->store(true, std::memory_order_release);
    };
    const void* waiter = f.waiter;
    in_flight_.push_back(std::move(f));
    if (drive(
            std::move(own), [&done] { return done->load(std::memory_order_acquire); },
            Clock::time_point::max(), waiter)) {
      completed_by_caller_.fetch_add(1, std::memory_order_relaxed);
    }
    return;  // else whoever holds own_ completes it, and the caller's wait sees it
  }
  if (alone && f.waiter != nullptr && f.park_for_waiter && f.work.library_wait()) {
    // Parked for its waiter (PostedOp::waiter): a look now would hand the library's wait to one
    // of its threads, whose wake-up would then wake the waiter; and the communication thread is
    // left asleep.
    in_flight_.push_back(std::move(f));
    parked_.store(true, std::memory_order_release);
    return;  // `own` lets go
  }
  if (alone) {
    // Otherwise poll briefly (PostedOp::caller_poll; at least once), yielding the core: a small
    // collective whose peers are in step completes within a few microseconds.
    const auto until = Clock::now() + f.caller_poll;
    std::exception_ptr error;
    for (;;) {
      if (poll_one(f, error)) {
        own.unlock();
        completed_by_caller_.fetch_add(1, std::memory_order_relaxed);
        f.complete(error);  // f.issue, which owns the buffers, outlives the copy-back
        if (error) keep_until_exit(std::move(f.issue));
        return;
      }
      if (Clock::now() >= until) break;
      std::this_thread::yield();
    }
  }
  in_flight_.push_back(std::move(f));
  own.unlock();
  hand_over();
}

void CommThread::take_over_parked() {
  if (!parked_.exchange(false, std::memory_order_acq_rel)) return;
  hand_over();
}

void CommThread::announce() {
  cv_.notify_all();         // the communication thread, idle or stopping
  signal_cv_.notify_all();  // whoever sleeps between completions: the thread or a waiter
  // Work that the communication thread cannot take while it runs completion callbacks, one of
  // which may wait for exactly this work.
  if (primary_in_callbacks_.load()) call_relief(/*urgent=*/true);
}

void CommThread::hand_over() {
  {
    std::lock_guard lock(mu_);
    handed_over_ = true;
    queued_.store(true);
  }
  announce();
}

void CommThread::call_relief(bool urgent) {
  if (!reliefs_allowed_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  if (stopping_ || reliefs_stop_) return;
  ++relief_calls_;
  if (urgent) relief_urgent_ = true;
  // Started on the first call; another only where every relief is held in completion callbacks
  // of its own (it is replaced as the communication thread is). A relief that is awake sees the
  // call when it looks for calls again.
  if (reliefs_.size() == reliefs_in_callbacks_ && !relief_starting_) {
    relief_starting_ = true;
    reliefs_.emplace_back([this] { relief_loop(); });
  }
  relief_cv_.notify_one();
}

bool CommThread::post_task(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    queue_.push_back(Item{{}, std::move(task)});
    queued_.store(true, std::memory_order_release);
  }
  announce();
  return true;
}

void CommThread::run_task(std::function<void()> task) {
  if (t_comm || t_driving) {
    throw std::logic_error(
        "mcr: a blocking runtime call was made from an operation's completion callback");
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw mcr::Error(kShutDownMessage);
    queue_.push_back(Item{{}, std::move(task), true});
    queued_.store(true, std::memory_order_release);
  }
  announce();
}

void CommThread::shutdown(std::function<void()> at_exit, bool abandon) {
  if (t_comm) return;
  {
    std::unique_lock lock(mu_);
    if (shutdown_requested_) {  // another thread is stopping it: wait for that
      cv_.wait(lock, [this] { return stopped_; });
      return;
    }
    shutdown_requested_ = true;
    abandon_ = abandon;
    at_exit_ = std::move(at_exit);
  }
  // A thread waiting for an operation that never completes (a daemon thread's collective that a
  // peer, gone or raising, never joins) holds own_ until its timeout; told to abandon, it lets go
  // within a round, and the communication thread stops at once.
  if (abandon) abandoning_.store(true, std::memory_order_release);
  announce();
  thread_.join();
  // The reliefs wait for calls, idle: the thread stopped only once none ran completions.
  std::vector<std::thread> reliefs;
  {
    std::lock_guard lock(mu_);
    reliefs_stop_ = true;
    reliefs.swap(reliefs_);
  }
  relief_cv_.notify_all();
  for (auto& r : reliefs)
    r.join();
  std::exception_ptr error;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    error = exit_error_;
  }
  announce();
  if (error) std::rethrow_exception(error);
}

void CommThread::run_item(Item& item) {
  if (item.op.issue) {
    issue(item.op);
  } else {
    item.task();
  }
}

void CommThread::issue(PostedOp& op) {
  try {
    mcr::Work w = op.issue();
    auto deadline = Clock::now() + op.timeout;
    in_flight_.push_back(InFlight{std::move(w),
                                  std::move(op.issue),
                                  std::move(op.complete),
                                  deadline,
                                  op.timeout,
                                  false,
                                  {},
                                  op.waiter});
  } catch (...) {
    // Not issued: nothing of the library's holds its buffers.
    ready_.push_back(Finished{std::move(op.complete), std::move(op.issue), std::current_exception(),
                              /*issued=*/false});
  }
}

bool CommThread::poll_one(InFlight& f, std::exception_ptr& error) {
  try {
    // Work::test() enforces the operation's timeout itself (given at issue): past it, it raises
    // mcr's TimeoutError, which names op, sequence number, backend, this rank and the peers that
    // have not reached the operation, and aborts the communicator.
    if (f.work.test()) return true;
    // A backstop a second past the limit, should a backend fail to time out on its own.
    if (Clock::now() >= f.deadline + std::chrono::seconds(1)) {
      f.work.wait(std::chrono::milliseconds(1));
      return true;
    }
    return false;
  } catch (...) {
    error = std::current_exception();
    return true;
  }
}

bool CommThread::poll_in_flight() {
  bool progressed = false;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    std::exception_ptr error;
    if (!poll_one(*it, error)) {
      ++it;
      continue;
    }
    // The issue function owns the buffers: they outlive the copy-back in complete().
    ready_.push_back(Finished{std::move(it->complete), std::move(it->issue), error, true});
    it = in_flight_.erase(it);
    progressed = true;
  }
  return progressed;
}

bool CommThread::run_ready(std::unique_lock<std::mutex>& own, Driver who) {
  // Completions run torch's future callbacks, which may post an operation and wait for it, or wait
  // for another one in flight (DDP's PowerSGD hook: `.then()` callbacks that call
  // `all_reduce(...).get_future().wait()`). So each runs without own_, one at a time, the others
  // left in ready_ for whoever holds own_ next; and whoever must finish the work meanwhile is told:
  // a relief for the communication thread, the communication thread for a relief or a waiter.
  // A batch run on one thread would leave the completions behind a callback that waits stuck
  // there, and a callback on another rank may wait for exactly one of them.
  while (!ready_.empty()) {
    Finished f = std::move(ready_.front());
    ready_.pop_front();
    if (who == Driver::primary) {
      // Stored before queued_ is read, both seq_cst: a post() stores queued_ and then reads
      // this, so either it calls a relief or this sees its operation.
      primary_in_callbacks_.store(true);
      ++callback_rounds_;
      if (!ready_.empty() || !in_flight_.empty() || queued_.load()) call_relief(/*urgent=*/false);
    } else {
      const bool more = !ready_.empty() || !in_flight_.empty() || queued_.load();
      if (who == Driver::relief) {
        std::lock_guard lock(mu_);
        ++reliefs_in_callbacks_;
      }
      if (more) hand_over();  // to the communication thread, or a relief while it runs callbacks
    }
    t_holds_own = false;
    own.unlock();
    f.complete(f.error);  // may post new operations: never under mu_ or own_
    f.complete = nullptr;
    if (f.error && f.issued) keep_until_exit(std::move(f.owner));
    bool held = true;
    switch (who) {
      case Driver::primary:
        primary_in_callbacks_.store(false);
        own.lock();  // a relief that drives meanwhile lets go of it after its round
        break;
      case Driver::relief: {
        std::lock_guard lock(mu_);
        --reliefs_in_callbacks_;
      }
        announce();  // a stop may wait for this (work_round)
        own.lock();
        break;
      case Driver::waiter:
        held = own.try_lock();
        break;
    }
    if (!held) {
      // The issue function owns the buffers the completion copied back from and may hold the
      // last reference to a communicator, whose state the holder of own_ must destroy: to
      // whoever holds it next. Once the thread has shut down the task is dropped, and the owner
      // leaks as a destroyed group's communicator does (ProcessGroupMCR's destructor).
      auto* owner = new std::function<mcr::Work()>(std::move(f.owner));
      post_task([owner] { delete owner; });
      return false;
    }
    t_holds_own = true;
    f.owner = nullptr;
    // A relief's turn ends when the communication thread is back: it takes what is left.
    if (who == Driver::relief && !primary_in_callbacks_.load()) break;
  }
  return true;
}

void CommThread::wait_for_work() {
  // Training issues operations back to back: watch for work a short while before sleeping, since
  // a condition-variable wake-up costs more than a small all_reduce.
  const auto until = Clock::now() + std::chrono::microseconds(50);
  while (!queued_.load(std::memory_order_acquire) && Clock::now() < until) {
    std::this_thread::yield();
  }
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] {
    return !queue_.empty() || handed_over_ || (shutdown_requested_ && reliefs_in_callbacks_ == 0);
  });
}

CommThread::Round CommThread::work_round(bool may_stop, std::unique_lock<std::mutex>& own,
                                         Driver who) {
  std::deque<Item> batch;
  {
    std::lock_guard lock(mu_);
    queued_.store(false, std::memory_order_relaxed);
    handed_over_ = false;
    parked_.store(false, std::memory_order_relaxed);  // whatever was parked is this thread's now
    // Stopped (by the communication thread, which then finalizes the runtime): a relief or a waiter
    // that comes back to this afterwards must not issue or poll anything (after an abandoning
    // stop, what was queued and in flight is left as it is).
    if (stopping_) return Round::idle;
    if (may_stop && shutdown_requested_ && abandon_ && reliefs_in_callbacks_ == 0) {
      // Exiting on an error: nobody waits for what is queued or in flight, and a peer may never
      // match it. Left as it is (the thread's state is never destroyed); finalize abandons the
      // runtime's side.
      stopping_ = true;
      return Round::idle;
    }
    batch.swap(queue_);
    if (batch.empty() && in_flight_.empty() && ready_.empty()) {
      // Idle. After shutdown(), this is the moment to stop: checked under the queue's lock, so
      // every operation posted before it was issued and has completed, and every later post
      // fails at once; and no relief runs completion callbacks, which may still post. Otherwise
      // posters may issue on their own threads until more arrives.
      if (may_stop && shutdown_requested_ && reliefs_in_callbacks_ == 0) stopping_ = true;
      return Round::idle;
    }
  }
  for (auto& item : batch) {
    run_item(item);
  }
  bool progressed = poll_in_flight() || !batch.empty();
  if (!ready_.empty()) {
    run_ready(own, who);
    progressed = true;
  }
  return progressed ? Round::progressed : Round::waiting;
}

void CommThread::pause(Clock::time_point idle_since, Clock::time_point until,
                       std::unique_lock<std::mutex>* release, std::uint64_t& seen) {
  // Where every operation in flight reports its own completion (Gloo), sleep until one does or
  // more is posted: polling would take the core from the library's threads.
  if (in_flight_signal_completion()) {
    if (release != nullptr) release->unlock();
    sleep_until_signalled(until, seen);
    if (release != nullptr) release->lock();
    return;
  }
  // Otherwise every test() also drives MPI's nonblocking collectives (a large all_reduce advances
  // a segment per call), so poll on, yielding the core; after a quiet millisecond (a peer still
  // computing, or DDP's buckets waiting on the backward pass) back off to short sleeps, or this
  // thread takes the cores the computation needs.
  if (Clock::now() - idle_since < std::chrono::milliseconds(1)) {
    std::this_thread::yield();
    return;
  }
  if (release != nullptr) release->unlock();
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  if (release != nullptr) release->lock();
}

bool CommThread::run_until_idle(std::unique_lock<std::mutex>& own) {
  auto idle_since = Clock::now();
  for (;;) {
    switch (work_round(/*may_stop=*/true, own, Driver::primary)) {
      case Round::idle:
        return stopping_;  // written under mu_ by this thread only
      case Round::progressed:
        idle_since = Clock::now();
        break;
      case Round::waiting:
        // own_ is let go of while sleeping, for a waiting caller to do this work meanwhile.
        pause(idle_since, Clock::time_point::max(), &own, thread_seen_);
        break;
    }
  }
}

CommThread::LibraryWait CommThread::wait_in_library(const void* waiter, Clock::time_point until,
                                                    std::unique_lock<std::mutex>& own) {
  if (waiter == nullptr || in_flight_.size() != 1) return LibraryWait::none;
  InFlight& f = in_flight_.front();
  // Gloo's wait runs to the operation's timeout (one cut short fails the whole context): only
  // for a wait at least as long. Nothing queued: this thread would otherwise issue it first.
  if (f.waiter != waiter || until < f.deadline || queued_.load(std::memory_order_acquire)) {
    return LibraryWait::none;
  }
  auto wait = f.work.library_wait();
  if (!wait) return LibraryWait::none;
  waited_in_library_.fetch_add(1, std::memory_order_relaxed);
  // Without own_: a post meanwhile is issued by its poster, who hands everything in flight, this
  // operation too, to the communication thread (issue_here), which then completes it.
  t_holds_own = false;
  own.unlock();
  wait();
  // After shutdown(abandon) the communication thread may have stopped and finalized meanwhile:
  // nothing may be issued or polled any more.
  if (abandoning_.load(std::memory_order_acquire) || !own.try_lock()) {
    return LibraryWait::lost_own;
  }
  t_holds_own = true;
  return LibraryWait::waited;
}

bool CommThread::drive_until(const std::function<bool()>& done, Clock::time_point until,
                             const void* waiter) {
  if (!caller_issue_.load(std::memory_order_relaxed) || t_comm || t_driving ||
      abandoning_.load(std::memory_order_acquire)) {
    return false;
  }
  std::unique_lock own(own_, std::try_to_lock);
  if (!own.owns_lock()) return false;
  return drive(std::move(own), done, until, waiter);
}

bool CommThread::drive(std::unique_lock<std::mutex> own, const std::function<bool()>& done,
                       Clock::time_point until, const void* waiter) {
  driven_by_waiter_.fetch_add(1, std::memory_order_relaxed);
  t_driving = true;
  t_holds_own = true;
  std::uint64_t seen = 0;
  {
    std::lock_guard lock(mu_);
    seen = signals_;  // before the first poll: a completion after it wakes this thread
  }
  auto idle_since = Clock::now();
  bool finished = done();
  while (!finished && Clock::now() < until) {
    if (abandoning_.load(std::memory_order_acquire)) {  // shutdown(abandon): the thread stops
      t_driving = false;
      t_holds_own = false;
      own.unlock();
      announce();
      return done();
    }
    const LibraryWait waited = wait_in_library(waiter, until, own);
    if (waited == LibraryWait::lost_own) {
      t_driving = false;
      t_holds_own = false;
      return done();  // the holder of own_ has everything in flight and completes it
    }
    const Round round = work_round(/*may_stop=*/false, own, Driver::waiter);
    if (!own.owns_lock()) {  // another thread took over while completions ran here
      t_driving = false;
      return done();
    }
    finished = done();
    if (finished || round == Round::idle) break;  // idle: completed by another thread meanwhile
    if (round == Round::progressed) {
      idle_since = Clock::now();
    } else {
      pause(idle_since, until, nullptr, seen);  // keeping own_: this thread does the work
    }
  }
  t_driving = false;
  t_holds_own = false;
  // What is left goes back to the communication thread.
  const bool left = !in_flight_.empty() || !ready_.empty();
  if (!left) parked_.store(false, std::memory_order_relaxed);
  own.unlock();
  if (left) hand_over();
  return finished || done();
}

bool CommThread::in_flight_signal_completion() {
  for (const auto& f : in_flight_) {
    if (!f.work.signals_completion()) return false;
  }
  return !in_flight_.empty();
}

void CommThread::sleep_until_signalled(Clock::time_point until, std::uint64_t& seen) {
  // A completion after the caller's last poll counted a signal it has not seen (the count goes
  // up after the operation's status), so this returns at once; one that comes later wakes it. The
  // backstop bounds how late poll_one sees an operation's deadline.
  std::unique_lock lock(mu_);
  const auto backstop = Clock::now() + std::chrono::milliseconds(10);
  signal_cv_.wait_until(lock, std::min(backstop, until),
                        [&] { return signals_ != seen || !queue_.empty() || handed_over_; });
  seen = signals_;
}

void CommThread::relief_loop() {
  ::pthread_setname_np(::pthread_self(), "mcr-comm-relief");
  t_comm = true;
  std::unique_lock lock(mu_);
  relief_starting_ = false;
  for (;;) {
    relief_cv_.wait(lock, [this] { return reliefs_stop_ || relief_calls_ > 0; });
    if (reliefs_stop_) return;
    relief_calls_ = 0;
    bool urgent = std::exchange(relief_urgent_, false);
    const std::uint64_t round = callback_rounds_.load();
    lock.unlock();
    if (!urgent) {
      // Called because the communication thread began running callbacks with work in flight:
      // leave it the grace to come back before taking its work over.
      std::this_thread::sleep_for(kReliefGrace);
      urgent = callback_rounds_.load() == round;
    }
    if (urgent) relieve();
    lock.lock();
  }
}

void CommThread::relieve() {
  // The communication thread's work, while it runs completion callbacks, until it comes back: then
  // this lets go of own_, for which it waits. Whoever else holds own_ meanwhile (a poster, a
  // waiter) has the work, and hands it over when it stops (announce() calls a relief again).
  while (primary_in_callbacks_.load()) {
    std::unique_lock own(own_, std::try_to_lock);
    if (!own.owns_lock()) {
      // A poster or a waiter holds it, and hands what it leaves over when it lets go; look again
      // shortly all the same, as a waiter's wait may be long.
      std::this_thread::sleep_for(kReliefGrace);
      continue;
    }
    t_holds_own = true;
    relieved_.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t seen = 0;
    {
      std::lock_guard lock(mu_);
      seen = signals_;
    }
    auto idle_since = Clock::now();
    for (;;) {
      const Round round = work_round(/*may_stop=*/false, own, Driver::relief);
      if (round == Round::idle || !primary_in_callbacks_.load()) {
        // What is left goes back to the communication thread, which may have come back and gone
        // idle meanwhile.
        t_holds_own = false;
        const bool left = !in_flight_.empty() || !ready_.empty();
        own.unlock();
        if (left) hand_over();
        return;
      }
      if (round == Round::progressed) {
        idle_since = Clock::now();
      } else {
        t_holds_own = false;
        pause(idle_since, Clock::time_point::max(), &own, seen);
        t_holds_own = true;
      }
    }
  }
}

void CommThread::loop() {
  ::pthread_setname_np(::pthread_self(), "mcr-comm");  // a name in top, ps -L and debuggers
  t_comm = true;
  for (;;) {
    wait_for_work();
    std::unique_lock own(own_);
    t_holds_own = true;
    if (!run_until_idle(own)) {
      t_holds_own = false;
      continue;
    }
    // Stopped: nothing queued or in flight, and nothing can be posted any more.
    try {
      at_exit_();
    } catch (...) {
      std::lock_guard lock(mu_);
      exit_error_ = std::current_exception();
    }
    t_holds_own = false;
    return;
  }
}

}  // namespace mcr::torch_ext
