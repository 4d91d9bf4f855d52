#include "backends/gloo/gloo_p2p.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>

#include <fmt/format.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

enum Status : int { kPending = 0, kDone = 1, kFailed = 2, kAborted = 3 };

// Slot of point-to-point messages with user tag `tag`. Gloo's collectives put their prefix
// (0x01-0x08) in the top byte; 0xF0 there keeps p2p messages from ever matching a collective's.
std::uint64_t p2p_slot(int tag) {
  return (std::uint64_t{0xF0} << 56) | static_cast<std::uint32_t>(tag);
}

std::string direction(bool is_send, int peer) {
  return is_send ? fmt::format("send to rank {}", peer) : fmt::format("recv from rank {}", peer);
}

}  // namespace

// ---- remote peers ------------------------------------------------------------------------------

struct GlooP2PState {
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  bool is_send = false;
  std::chrono::milliseconds timeout{0};
  GlooCallSite site;
  std::atomic<int> status{kPending};
  std::exception_ptr error;  // written before status becomes kFailed
  // Gloo's wait is made once, by whoever claims it: the caller of block() (the operation's own
  // waiter, as in a plain gloo program) or a thread of the pool (when the caller polls instead).
  std::atomic<bool> claimed{false};
  std::atomic<bool> queued{false};  // handed to the pool once, on the first test()
  std::atomic<bool> kept{false};    // handed to GlooWaiterPool::keep once
  std::mutex mu;                    // with `ended`: wakes a block() that found the wait claimed
  std::condition_variable ended;

  bool claim() noexcept { return !claimed.exchange(true, std::memory_order_acq_rel); }

  // Until the status is no longer pending, at most `limit`: for whoever did not claim the wait.
  void sleep_until_ended(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    ended.wait_for(lock, limit, [&] { return status.load(std::memory_order_acquire) != kPending; });
  }

  void wait() noexcept {
    try {
      bool completed = false;
      if (is_send) {
        MCR_GLOO_CHECK(site, completed = buffer->waitSend(timeout));
      } else {
        MCR_GLOO_CHECK(site, completed = buffer->waitRecv(timeout));
      }
      status.store(completed ? kDone : kAborted, std::memory_order_release);
    } catch (...) {
      error = std::current_exception();
      status.store(kFailed, std::memory_order_release);
    }
    { std::lock_guard lock(mu); }  // a block() between its check and its sleep sees the status
    ended.notify_all();
    signal_operation_completed();
  }

  void abort() noexcept {
    if (is_send) {
      buffer->abortWaitSend();
    } else {
      buffer->abortWaitRecv();
    }
  }
};

namespace {

// An operation that did not complete stays listed in gloo's connection (gloo has no way to take
// a posted send or receive back): its buffer is kept with the backend (GlooWaiterPool::keep).
// Without the pool the backend is gone, and its connections with it.
void keep_unless_done(const std::shared_ptr<GlooP2PState>& state,
                      const std::shared_ptr<GlooWaiterPool>& pool) noexcept {
  if (state->status.load(std::memory_order_acquire) == kDone) return;
  if (state->kept.exchange(true, std::memory_order_acq_rel)) return;
  if (pool) pool->keep(state);
}

class GlooP2POp final : public PendingOp {
 public:
  GlooP2POp(std::shared_ptr<GlooP2PState> state, std::weak_ptr<GlooWaiterPool> pool)
      : state_(std::move(state)), pool_(std::move(pool)) {}
  ~GlooP2POp() override {
    if (state_->status.load(std::memory_order_acquire) == kPending) state_->abort();
    keep_unless_done(state_, pool_.lock());
  }

  bool test() override {
    switch (state_->status.load(std::memory_order_acquire)) {
      case kPending:
        hand_to_pool();
        return false;
      case kDone:
        return true;
      case kFailed:
        std::rethrow_exception(state_->error);
      default:
        throw BackendError(fmt::format("gloo: {} #{} was abandoned before it completed",
                                       state_->site.op, state_->site.sequence));
    }
  }
  // The status as it stands: no pool thread is started for a look in passing.
  bool peek() override {
    if (state_->status.load(std::memory_order_acquire) == kPending) return false;
    return test();
  }

  void abandon() noexcept override {
    state_->abort();
    keep_unless_done(state_, pool_.lock());
  }
  // Whoever makes gloo's wait signals; test() has handed it to the pool if nobody else has.
  bool signals_completion() const noexcept override {
    return state_->queued.load(std::memory_order_acquire) ||
           state_->claimed.load(std::memory_order_acquire);
  }

  // Gloo's own wait in this thread, one wake-up from its I/O thread away, as a plain gloo program
  // waits. Only a wait of at least the operation's timeout does so: gloo treats a wait that runs
  // out as a failure of the whole context.
  bool block(std::chrono::milliseconds limit) override {
    auto& s = *state_;
    if (s.status.load(std::memory_order_acquire) != kPending) return true;
    if (limit >= s.timeout && s.claim()) {
      s.wait();
      return true;
    }
    // A pool thread has the wait (the caller polled first) or is given it: sleep until it reports.
    hand_to_pool();
    s.sleep_until_ended(limit);
    return true;
  }

  // Gloo's own wait, as block() makes it, for a thread that does not call mcr meanwhile: it keeps
  // only the shared state. A second second past the timeout bounds the sleep of a waiter that
  // found the wait claimed (the claimant's own wait ends at the timeout).
  std::function<void()> library_wait() override {
    return [s = state_] {
      if (s->status.load(std::memory_order_acquire) != kPending) return;
      if (s->claim()) {
        s->wait();
        return;
      }
      s->sleep_until_ended(s->timeout + std::chrono::seconds(1));
    };
  }

 private:
  // Gloo has no non-blocking test: from the first poll on, a pool thread waits for the operation.
  // (The pool is gone only once the backend is: then nothing is left to observe it.)
  void hand_to_pool() {
    if (state_->queued.exchange(true, std::memory_order_acq_rel)) return;
    if (auto pool = pool_.lock()) pool->wait_for(state_);
  }

  std::shared_ptr<GlooP2PState> state_;
  std::weak_ptr<GlooWaiterPool> pool_;
};

}  // namespace

GlooWaiterPool::~GlooWaiterPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (const auto& op : active_)
      op->abort();
  }
  cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void GlooWaiterPool::keep(const std::shared_ptr<GlooP2PState>& op) noexcept {
  try {
    std::lock_guard lock(mu_);
    kept_.push_back(op);
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory: the state goes with its owner
  }
}

void GlooWaiterPool::wait_for(std::shared_ptr<GlooP2PState> op) {
  std::lock_guard lock(mu_);
  active_.insert(op);
  queue_.push_back(std::move(op));
  if (static_cast<int>(queue_.size()) > idle_) {
    threads_.emplace_back([this] { loop(); });
  } else {
    cv_.notify_one();
  }
}

void GlooWaiterPool::loop() {
  ::pthread_setname_np(::pthread_self(), "mcr-gloo-p2p");  // a name in debuggers; best effort
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, nothing left
    auto op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (op->claim()) op->wait();  // else its caller waits in block()
    lock.lock();
    active_.erase(op);
  }
}

// ---- self --------------------------------------------------------------------------------------

struct GlooSelfMailbox::State {
  std::atomic<int> status{kPending};
  std::string error;  // written before status becomes kFailed
};

namespace {

class GlooSelfOp final : public PendingOp {
 public:
  GlooSelfOp(std::shared_ptr<GlooSelfMailbox> box, std::shared_ptr<GlooSelfMailbox::State> state,
             const GlooP2P& p)
      : box_(std::move(box)),
        state_(std::move(state)),
        site_(p.site),
        timeout_(p.timeout),
        deadline_(std::chrono::steady_clock::now() + p.timeout) {}

  bool test() override {
    switch (state_->status.load(std::memory_order_acquire)) {
      case kDone:
        return true;
      case kFailed:
        throw BackendError(state_->error);
      default:
        break;
    }
    if (std::chrono::steady_clock::now() > deadline_) {
      box_->cancel(state_);
      throw TimeoutError(fmt::format("gloo: {} #{} to/from itself (rank {}) found no matching "
                                     "operation within {} ms",
                                     site_.op, site_.sequence, site_.rank, timeout_.count()),
                         std::string(site_.op), site_.sequence, "gloo");
    }
    return false;
  }
  void abandon() noexcept override { box_->cancel(state_); }
  ~GlooSelfOp() override { box_->cancel(state_); }

 private:
  std::shared_ptr<GlooSelfMailbox> box_;
  std::shared_ptr<GlooSelfMailbox::State> state_;
  GlooCallSite site_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

std::unique_ptr<PendingOp> GlooSelfMailbox::post(const GlooP2P& p) {
  auto state = std::make_shared<State>();
  {
    std::lock_guard lock(mu_);
    auto& mine = p.is_send ? sends_ : recvs_;
    auto& theirs = p.is_send ? recvs_ : sends_;
    auto match =
        std::find_if(theirs.begin(), theirs.end(), [&](const Entry& e) { return e.tag == p.tag; });
    if (match == theirs.end()) {
      mine.push_back({state, p.data, p.bytes, p.tag});
    } else {
      const Entry& other = *match;
      const Entry send = p.is_send ? Entry{state, p.data, p.bytes, p.tag} : other;
      const Entry recv = p.is_send ? other : Entry{state, p.data, p.bytes, p.tag};
      if (send.bytes > recv.bytes) {
        const std::string why = fmt::format(
            "gloo: rank {} sent {} bytes to itself with tag {} into a receive of {} bytes",
            p.site.rank, send.bytes, p.tag, recv.bytes);
        for (const auto& s : {send.state, recv.state}) {
          s->error = why;
          s->status.store(kFailed, std::memory_order_release);
        }
      } else {
        if (send.bytes > 0) std::memcpy(recv.data, send.data, send.bytes);
        send.state->status.store(kDone, std::memory_order_release);
        recv.state->status.store(kDone, std::memory_order_release);
      }
      theirs.erase(match);
    }
  }
  return std::make_unique<GlooSelfOp>(shared_from_this(), std::move(state), p);
}

void GlooSelfMailbox::cancel(const std::shared_ptr<State>& state) {
  std::lock_guard lock(mu_);
  for (auto* q : {&sends_, &recvs_}) {
    std::erase_if(*q, [&](const Entry& e) { return e.state == state; });
  }
}

// ---- entry point -------------------------------------------------------------------------------

std::unique_ptr<PendingOp> start_gloo_p2p(gloo::Context& ctx,
                                          const std::shared_ptr<GlooWaiterPool>& pool,
                                          GlooSelfMailbox& self, const GlooP2P& p, bool may_block) {
  if (p.tag < 0) {
    throw InvalidArgument(fmt::format("gloo: {} tag {} is negative", p.site.op, p.tag));
  }
  if (p.peer == ctx.rank) return self.post(p);

  // An empty message still travels (it matches a receive); gloo wants a non-null address.
  static std::uint8_t empty_message[1];
  void* data = p.bytes == 0 || p.data == nullptr ? empty_message : p.data;
  auto state = std::make_shared<GlooP2PState>();
  state->is_send = p.is_send;
  state->timeout = p.timeout;
  state->site = p.site;
  MCR_GLOO_CHECK(p.site, state->buffer = ctx.createUnboundBuffer(data, p.bytes));
  if (p.is_send) {
    MCR_GLOO_CHECK(p.site, state->buffer->send(p.peer, p2p_slot(p.tag), 0, p.bytes));
  } else {
    MCR_GLOO_CHECK(p.site, state->buffer->recv(p.peer, p2p_slot(p.tag), 0, p.bytes));
  }
  if (may_block) {
    state->claim();
    state->wait();
    keep_unless_done(state, pool);
    if (state->status.load() == kFailed) std::rethrow_exception(state->error);
    if (state->status.load() != kDone) {
      throw BackendError(fmt::format("gloo: {} #{} ({}) was aborted", p.site.op, p.site.sequence,
                                     direction(p.is_send, p.peer)));
    }
    return nullptr;
  }
  return std::make_unique<GlooP2POp>(std::move(state), pool);
}

}  // namespace mcr::detail
