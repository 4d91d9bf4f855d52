#include "bootstrap/given_store.hpp"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace mcr::detail {
namespace {

class GivenStore final : public Store {
 public:
  GivenStore(std::shared_ptr<KeyValueStore> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const Bytes& value) override { store_->set(named(key), value); }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_->get(named(key), timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return store_->add(named(key), delta);
  }
  bool check(const std::vector<std::string>& keys) override {
    std::vector<std::string> named_keys;
    named_keys.reserve(keys.size());
    for (const auto& k : keys)
      named_keys.push_back(named(k));
    return store_->check(named_keys);
  }
  std::string description() const override { return store_->description(); }

  // mcr cannot bound a given store's requests (torch's stores wait their own timeout, 30 minutes
  // by default), so the probe asks on a thread of its own and waits at most `bound`. One request
  // at a time: while an earlier probe's has not returned, a new probe waits for that one instead
  // of asking again, so a store that is gone never collects threads. A request that fails at once
  // (a reset connection) did answer: the caller's next request reports that failure itself.
  bool responds_within(std::chrono::milliseconds bound) override {
    std::unique_lock lock(probe_->mu);
    if (!probe_->pending) {
      probe_->pending = true;
      std::thread([probe = probe_, store = store_, key = named("probe")] {
        try {
          store->check({key});
        } catch (...) {  // answered, with an error
        }
        std::lock_guard done(probe->mu);
        probe->pending = false;
        probe->cv.notify_all();
      }).detach();
    }
    return probe_->cv.wait_for(lock, bound, [this] { return !probe_->pending; });
  }

 private:
  struct Probe {  // shared with a probe's thread, which may outlive the store's adapter
    std::mutex mu;
    std::condition_variable cv;
    bool pending = false;
  };

  // Unconditionally prefixed (even keys that already start with "mcr/"): two runtime keys can
  // then never map to the same store key.
  std::string named(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<KeyValueStore> store_;
  std::string prefix_;
  std::shared_ptr<Probe> probe_ = std::make_shared<Probe>();
};

}  // namespace

std::unique_ptr<Store> adopt_given_store(std::shared_ptr<KeyValueStore> store, int rank) {
  const std::int64_t generation = store->add(fmt::format("mcr/generation/{}", rank), 1);
  return std::make_unique<GivenStore>(std::move(store), fmt::format("mcr/{}/", generation));
}

}  // namespace mcr::detail
