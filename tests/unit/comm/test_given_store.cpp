// InitOptions::store in one process: the checks of rank and size (before anything blocks), and a
// world of one formed through an in-memory store, whose keys must all lie under "mcr/".
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/given_store.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"

namespace {

class MemoryStore final : public mcr::KeyValueStore {
 public:
  void set(const std::string& key, const Bytes& value) override {
    std::lock_guard lock(mu_);
    kv_[key] = value;
  }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::lock_guard lock(mu_);
    auto it = kv_.find(key);  // one process: nobody else could set it while we wait
    if (it == kv_.end()) {
      throw mcr::TimeoutError(
          "memory store: no key '" + key + "' after " + std::to_string(timeout.count()) + " ms",
          "store_get", 0, "memory");
    }
    return it->second;
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::lock_guard lock(mu_);
    auto& v = kv_[key];
    const std::int64_t now = (v.empty() ? 0 : std::stoll(std::string(v.begin(), v.end()))) + delta;
    const std::string text = std::to_string(now);
    v.assign(text.begin(), text.end());
    return now;
  }
  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mu_);
    for (const auto& k : keys)
      if (kv_.count(k) == 0) return false;
    return true;
  }
  std::string description() const override { return "memory store"; }

  std::vector<std::string> keys() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [k, v] : kv_)
      out.push_back(k);
    return out;
  }

 private:
  std::mutex mu_;
  std::map<std::string, Bytes> kv_;
};

std::string init_error(const mcr::InitOptions& o) {
  try {
    mcr::init(o);
  } catch (const mcr::InvalidArgument& e) {
    return e.what();
  }
  mcr::finalize();
  return "(no InvalidArgument)";
}

}  // namespace

TEST(GivenStore, RankAndSizeAreChecked) {
  mcr::InitOptions o;
  o.store = std::make_shared<MemoryStore>();
  o.size = 2;
  EXPECT_NE(init_error(o).find("InitOptions::rank = -1"), std::string::npos) << init_error(o);
  o.rank = 2;
  EXPECT_NE(init_error(o).find("InitOptions::rank = 2 is outside [0, 2)"), std::string::npos);
  o.rank = 0;
  o.size = 0;
  EXPECT_NE(init_error(o).find("InitOptions::size = 0"), std::string::npos) << init_error(o);
  mcr::InitOptions no_store;
  no_store.rank = 1;
  no_store.size = 2;
  EXPECT_NE(init_error(no_store).find("without InitOptions::store"), std::string::npos);
  EXPECT_FALSE(mcr::is_initialized());
}

TEST(GivenStore, FormsAWorldOfOne) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "RANK", "WORLD_SIZE",
                        "MCR_BACKENDS", "MCR_RULES", "MCR_RULES_FILE", "MCR_TUNING"})
    unsetenv(v);
  auto store = std::make_shared<MemoryStore>();
  mcr::InitOptions o;
  o.store = store;
  o.rank = 0;
  o.size = 1;
  mcr::Communicator world = mcr::init(o);
  const mcr::RuntimeInfo info = mcr::runtime_info();
  EXPECT_EQ(info.rendezvous, "memory store");
  EXPECT_EQ(info.world_exchange, "store");
  EXPECT_EQ(info.store_host, "");
  EXPECT_EQ(world.size(), 1);
  std::vector<float> v{1.0F, 2.0F};
  world.all_reduce(mcr::Tensor(v.data(), v.size(), mcr::DType::f32), mcr::ReduceOp::sum);
  EXPECT_EQ(v, (std::vector<float>{1.0F, 2.0F}));
  mcr::finalize();
  const auto keys = store->keys();
  EXPECT_FALSE(keys.empty());
  for (const auto& k : keys)
    EXPECT_EQ(k.rfind("mcr/", 0), 0U) << k;
  EXPECT_EQ(store->check({"mcr/generation/0"}), true);
}

// A store whose check() blocks until released: a store host that stopped answering.
class StalledStore final : public mcr::KeyValueStore {
 public:
  void set(const std::string&, const Bytes&) override {}
  Bytes get(const std::string&, std::chrono::milliseconds) override { return {}; }
  std::int64_t add(const std::string&, std::int64_t delta) override { return delta; }
  bool check(const std::vector<std::string>&) override {
    std::unique_lock lock(mu_);
    ++checks_;
    cv_.notify_all();  // for wait_for_checks()
    cv_.wait(lock, [this] { return released_; });
    return false;
  }
  /// Waits (up to `limit`) until check() has been entered `n` times: the probe asks on a thread
  /// of its own, which a loaded machine may start late.
  int wait_for_checks(int n, std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, limit, [&] { return checks_ >= n; });
    return checks_;
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int checks() {
    std::lock_guard lock(mu_);
    return checks_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  int checks_ = 0;
};

TEST(GivenStore, ProbeAnswersForAResponsiveStore) {
  auto store = mcr::detail::adopt_given_store(std::make_shared<MemoryStore>(), 0);
  EXPECT_TRUE(store->responds_within(std::chrono::milliseconds(2000)));
  EXPECT_TRUE(store->responds_within(std::chrono::milliseconds(2000)));
}

TEST(GivenStore, ProbeGivesUpOnAStalledStoreAndAsksOnceAtATime) {
  auto stalled = std::make_shared<StalledStore>();
  auto store = mcr::detail::adopt_given_store(stalled, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(store->responds_within(std::chrono::milliseconds(50)));
  // Bounded by the probe, not by the store: a generous limit that only a hang would exceed.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The first probe's request has not returned: the second probe waits for it, not asking again.
  EXPECT_FALSE(store->responds_within(std::chrono::milliseconds(50)));
  EXPECT_EQ(stalled->wait_for_checks(1, std::chrono::seconds(5)), 1);
  stalled->release();
  // Once the store answers, so do the probes: the pending request's, or a new one's when that
  // had already returned.
  EXPECT_TRUE(store->responds_within(std::chrono::milliseconds(5000)));
  EXPECT_TRUE(store->responds_within(std::chrono::milliseconds(5000)));
  EXPECT_LE(stalled->checks(), 3);
}
