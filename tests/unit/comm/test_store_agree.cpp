// The members' verdict on a step each of them took (group_agree_succeeded, core/store_wait.hpp),
// with the members as threads of this process over one in-memory store and random arrival times:
// every member, one that arrives after the decision included, must reach the same verdict, and a
// member must never wait for one that is still inside a failed step. Seeded; the seed is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "core/store_wait.hpp"
#include "mcr/errors.hpp"

namespace {

using namespace std::chrono_literals;
using mcr::detail::Bytes;

// A store shared by the member threads; get() waits for the key as the TCP store does.
class SharedMemory {
 public:
  void set(const std::string& key, const Bytes& value) {
    {
      std::lock_guard lock(mu_);
      kv_[key] = value;
    }
    changed_.notify_all();
  }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, timeout, [&] { return kv_.count(key) != 0; })) {
      throw mcr::TimeoutError("memory store: key '" + key + "' was not set within " +
                                  std::to_string(timeout.count()) + " ms",
                              "store_get", 0, "store");
    }
    return kv_[key];
  }
  std::int64_t add(const std::string& key, std::int64_t delta) {
    std::int64_t now = 0;
    {
      std::lock_guard lock(mu_);
      auto& v = kv_[key];
      now = (v.empty() ? 0 : std::stoll(std::string(v.begin(), v.end()))) + delta;
      const std::string text = std::to_string(now);
      v.assign(text.begin(), text.end());
    }
    changed_.notify_all();
    return now;
  }
  bool check(const std::vector<std::string>& keys) {
    std::lock_guard lock(mu_);
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return kv_.count(k) != 0; });
  }
  std::size_t size() {
    std::lock_guard lock(mu_);
    return kv_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> kv_;
};

// One member's view of the shared store.
class MemberStore final : public mcr::detail::Store {
 public:
  explicit MemberStore(SharedMemory& m) : m_(m) {}
  void set(const std::string& key, const Bytes& value) override { m_.set(key, value); }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    return m_.get(key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return m_.add(key, delta);
  }
  bool check(const std::vector<std::string>& keys) override { return m_.check(keys); }

 private:
  SharedMemory& m_;
};

std::unique_ptr<mcr::detail::Bootstrap> member(SharedMemory& m, int rank, int size,
                                               std::chrono::milliseconds timeout) {
  mcr::detail::LaunchInfo launch;
  launch.rank = rank;
  launch.size = size;
  return std::make_unique<mcr::detail::Bootstrap>(launch, nullptr, std::make_unique<MemberStore>(m),
                                                  timeout);
}

// What a member came away with: the verdict ("" to go on, else why all stop) or the error.
struct Outcome {
  std::optional<std::string> verdict;
  std::string timeout;                 // TimeoutError's message
  std::chrono::milliseconds returned;  // after the threads started
};

struct Arrival {
  int rank;
  std::chrono::milliseconds delay;  // before it calls
  std::string failure;              // "" where its step succeeded
};

// Runs every arrival on its own thread; members not in `arrivals` never come.
std::map<int, Outcome> agree(const std::vector<Arrival>& arrivals, int size,
                             std::chrono::milliseconds timeout, const std::string& tag = "t") {
  SharedMemory store;
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    members[static_cast<std::size_t>(r)] = r;
  std::mutex mu;
  std::map<int, Outcome> outcomes;
  std::vector<std::thread> threads;
  const auto began = std::chrono::steady_clock::now();
  for (const Arrival& a : arrivals) {
    threads.emplace_back([&, a] {
      auto b = member(store, a.rank, size, timeout);
      std::this_thread::sleep_for(a.delay);
      Outcome o;
      try {
        o.verdict = mcr::detail::group_agree_succeeded(*b, members, tag, a.failure, timeout,
                                                       "split", "split #1 of communicator 0");
      } catch (const mcr::TimeoutError& e) {
        o.timeout = e.what();
      }
      o.returned = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - began);
      std::lock_guard lock(mu);
      outcomes[a.rank] = o;
    });
  }
  for (auto& t : threads)
    t.join();
  return outcomes;
}

std::uint32_t seed() {
  static const std::uint32_t s = std::random_device{}();
  return s;
}

TEST(StoreAgree, EverySuccessGoesOnInAnyOrder) {
  std::printf("seed %u\n", seed());
  std::mt19937 rng(seed());
  for (int size = 1; size <= 5; ++size) {
    for (int round = 0; round < 4; ++round) {
      std::vector<Arrival> arrivals;
      for (int r = 0; r < size; ++r)
        arrivals.push_back({r, std::chrono::milliseconds(rng() % 30), ""});
      const auto outcomes = agree(arrivals, size, 5s);
      ASSERT_EQ(outcomes.size(), static_cast<std::size_t>(size));
      for (const auto& [rank, o] : outcomes) {
        ASSERT_TRUE(o.verdict.has_value()) << "rank " << rank << ": " << o.timeout;
        EXPECT_EQ(*o.verdict, "") << "rank " << rank << " of " << size;
      }
    }
  }
}

TEST(StoreAgree, OneFailureStopsEveryMemberAtOnce) {
  std::printf("seed %u\n", seed());
  std::mt19937 rng(seed() + 1);
  for (int size = 2; size <= 5; ++size) {
    for (int round = 0; round < 2; ++round) {
      const int failing = static_cast<int>(rng() % static_cast<unsigned>(size));
      // One member (not the failing one) is still inside its step for 1 s, as a rank in Gloo's
      // rendezvous is when a peer failed there: the others must decide without it.
      const int slow = (failing + 1) % size;
      std::vector<Arrival> arrivals;
      for (int r = 0; r < size; ++r) {
        const auto delay = r == slow ? 1000ms : std::chrono::milliseconds(rng() % 30);
        arrivals.push_back({r, delay, r == failing ? "socket: Too many open files" : ""});
      }
      const auto outcomes = agree(arrivals, size, 5s);
      const std::string expected =
          "world rank " + std::to_string(failing) + ": socket: Too many open files";
      for (const auto& [rank, o] : outcomes) {
        ASSERT_TRUE(o.verdict.has_value()) << "rank " << rank << ": " << o.timeout;
        EXPECT_EQ(*o.verdict, expected) << "rank " << rank << " of " << size;
        if (rank != slow) {
          EXPECT_LT(o.returned, 700ms) << "rank " << rank << " of " << size
                                       << " waited for the member still inside its step";
        }
      }
    }
  }
}

TEST(StoreAgree, SeveralFailuresGiveOneVerdict) {
  std::printf("seed %u\n", seed());
  std::mt19937 rng(seed() + 2);
  for (int round = 0; round < 8; ++round) {
    std::vector<Arrival> arrivals;
    for (int r = 0; r < 4; ++r) {
      arrivals.push_back({r, std::chrono::milliseconds(rng() % 20),
                          r % 2 == 0 ? "failed on " + std::to_string(r) : ""});
    }
    const auto outcomes = agree(arrivals, 4, 5s);
    const std::optional<std::string> first = outcomes.at(0).verdict;
    ASSERT_TRUE(first.has_value());
    EXPECT_TRUE(*first == "world rank 0: failed on 0" || *first == "world rank 2: failed on 2")
        << *first;
    for (const auto& [rank, o] : outcomes)
      EXPECT_EQ(o.verdict, first) << "rank " << rank;
  }
}

TEST(StoreAgree, MissingMemberTimesOutEveryoneAndTheLateOneToo) {
  std::printf("seed %u\n", seed());
  // Rank 2 of 3 arrives after the others gave up (200 ms): all three raise TimeoutError.
  const auto outcomes = agree({{0, 0ms, ""}, {1, 10ms, ""}, {2, 600ms, ""}}, 3, 200ms);
  for (const auto& [rank, o] : outcomes) {
    EXPECT_FALSE(o.verdict.has_value()) << "rank " << rank << " went on: '" << *o.verdict << "'";
    EXPECT_NE(o.timeout.find("gave up after waiting 200 ms"), std::string::npos)
        << "rank " << rank << ": " << o.timeout;
    EXPECT_NE(o.timeout.find("2 of 3 had arrived"), std::string::npos) << o.timeout;
    EXPECT_NE(o.timeout.find("split #1 of communicator 0"), std::string::npos) << o.timeout;
  }
}

TEST(StoreAgree, FailureAfterAGiveUpIsATimeout) {
  // Rank 1 fails only after rank 0 gave up: the give-up decided, on both.
  const auto outcomes = agree({{0, 0ms, ""}, {1, 500ms, "late failure"}}, 2, 200ms);
  for (const auto& [rank, o] : outcomes) {
    EXPECT_FALSE(o.verdict.has_value()) << "rank " << rank;
    EXPECT_NE(o.timeout.find("gave up"), std::string::npos) << o.timeout;
  }
}

TEST(StoreAgree, TwoKeysPerAgreement) {
  // The store never forgets a key, and groups may be formed by the thousand.
  SharedMemory store;
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      auto b = member(store, r, 4, 5s);
      EXPECT_EQ(mcr::detail::group_agree_succeeded(*b, {0, 1, 2, 3}, "t", "", 5s, "split", "w"),
                "");
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(store.size(), 2u);
}

}  // namespace
