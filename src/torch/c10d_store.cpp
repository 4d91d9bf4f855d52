#include "c10d_store.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mcr/errors.hpp>

namespace mcr::torch_ext {
namespace {

using Clock = std::chrono::steady_clock;

class C10dStore final : public mcr::KeyValueStore {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const Bytes& value) override {
    guarded("set", key, [&] { store_->set(key, value); });
  }

  // mcr's get waits at most `timeout` for this call; c10d's get waits the store's own timeout.
  // So the wait is done here, by polling check(), and c10d's get runs once the key exists (and
  // then returns at once). Not c10d's wait(keys, timeout): TCPStore's wait leaves its connection's
  // receive timeout at that value for later requests, and a wait that times out leaves the
  // server's late answer in the connection, where the next request would read it. check() is
  // answered at once by every c10d store; the pauses between checks grow to kMaxPause.
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + std::max(timeout, std::chrono::milliseconds(0));
    auto pause = std::chrono::microseconds(200);
    while (!guarded("check", key, [&] { return store_->check({key}); })) {
      const auto now = Clock::now();
      if (now >= deadline) {
        throw mcr::TimeoutError("torch store: key '" + key + "' was not set within " +
                                    std::to_string(timeout.count()) + " ms",
                                "store_get", 0, "torch_store");
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min<std::chrono::microseconds>(pause * 2, kMaxPause);
    }
    return guarded("get", key, [&] { return store_->get(key); });
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return guarded("add", key, [&] { return store_->add(key, delta); });
  }

  bool check(const std::vector<std::string>& keys) override {
    return guarded("check", keys.empty() ? std::string() : keys.front(),
                   [&] { return store_->check(keys); });
  }

  std::string description() const override { return "torch store"; }

 private:
  static constexpr std::chrono::microseconds kMaxPause{20'000};

  // c10d reports failures as c10::Error or std::runtime_error; mcr's callers expect mcr errors.
  template <class F>
  static auto guarded(const char* what, const std::string& key, F&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const mcr::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw mcr::BackendError(std::string("torch store: ") + what + " '" + key +
                              "' failed: " + e.what());
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::shared_ptr<mcr::KeyValueStore> wrap_c10d_store(c10::intrusive_ptr<c10d::Store> store) {
  if (!store)
    throw mcr::InvalidArgument("mcr.torch: the c10d store passed to init_runtime is None");
  return std::make_shared<C10dStore>(std::move(store));
}

}  // namespace mcr::torch_ext
