// Point-to-point over gloo unbound buffers. Sends and receives are posted at once in the caller's
// thread, never queued behind collectives, so a rank may post irecv then isend in a ring. Gloo
// can only observe completion by blocking (a zero-timeout wait would count as a timeout and close
// every connection of the context). A caller that waits for the operation makes gloo's wait
// itself, as a plain gloo program does; once the operation is polled instead (test()), a thread
// of a small pool that grows to the number of operations in flight waits for it, so no operation
// ever waits behind another one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "backends/gloo/gloo_check.hpp"
#include "core/backend.hpp"

namespace gloo {
class Context;
}

namespace mcr::detail {

/// One send or receive, in bytes.
struct GlooP2P {
  bool is_send = false;
  int peer = 0;
  void* data = nullptr;
  std::size_t bytes = 0;
  int tag = 0;
  std::chrono::milliseconds timeout{0};
  GlooCallSite site;
};

struct GlooP2PState;

/// Threads that wait for pending point-to-point operations, one operation per thread at a time.
class GlooWaiterPool {
 public:
  GlooWaiterPool() = default;
  /// Aborts the waits still in progress and joins every thread.
  ~GlooWaiterPool();
  GlooWaiterPool(const GlooWaiterPool&) = delete;
  GlooWaiterPool& operator=(const GlooWaiterPool&) = delete;

  void wait_for(std::shared_ptr<GlooP2PState> op);
  /// Keeps an operation that did not complete (abandoned, aborted or failed) as long as the
  /// backend: gloo's connection still lists it, and a late message for it must find its buffer.
  /// Freed, the connection's I/O thread would spin on the unread message (or, for a send, on a
  /// write it can never make), and every later message on that connection would wait behind it.
  void keep(const std::shared_ptr<GlooP2PState>& op) noexcept;

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GlooP2PState>> queue_;
  std::unordered_set<std::shared_ptr<GlooP2PState>> active_;
  std::vector<std::shared_ptr<GlooP2PState>> kept_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
};

/// Messages a rank sends to itself (gloo has no connection to self): matched by tag, in order.
class GlooSelfMailbox : public std::enable_shared_from_this<GlooSelfMailbox> {
 public:
  struct State;
  std::unique_ptr<PendingOp> post(const GlooP2P& p);
  void cancel(const std::shared_ptr<State>& state);

 private:
  struct Entry {
    std::shared_ptr<State> state;
    void* data;
    std::size_t bytes;
    int tag;
  };
  std::mutex mu_;
  std::deque<Entry> sends_;
  std::deque<Entry> recvs_;
};

/// Posts `p` on `ctx`. With `may_block`, waits for completion in this thread and returns nullptr;
/// else the operation is waited for by its caller's block(), or by `pool` once it is polled.
std::unique_ptr<PendingOp> start_gloo_p2p(gloo::Context& ctx,
                                          const std::shared_ptr<GlooWaiterPool>& pool,
                                          GlooSelfMailbox& self, const GlooP2P& p, bool may_block);

}  // namespace mcr::detail
