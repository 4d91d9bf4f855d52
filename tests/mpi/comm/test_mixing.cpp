// Randomized mixing test: long random sequences of operations over every backend, sync and async,
// with async handles completed in a per-rank random order, each result verified.
//
// Every rank derives the same sequence of operations from the seed (the communicator contract);
// only when and in which order each rank waits for its outstanding handles differs per rank (a
// second generator seeded with seed and rank). A per-operation timeout makes a stalled run fail
// with mcr::TimeoutError instead of hanging.
//
// Seeds: --seeds=1-8 or --seeds=3,7 (or MCR_TEST_SEEDS); --ops=N (MCR_TEST_OPS, default 300).
// Every failure message names the seed and the operation index: rerun with --seeds=<seed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "harness.hpp"
#include "verify/api_driver.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kOpTimeout = 20s;

// A small, fully specified generator (splitmix64): the sequence is the same on every rank and on
// every platform, unlike the std distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::uint64_t state_;
};

std::vector<std::uint64_t> parse_seeds(const std::string& text) {
  std::vector<std::uint64_t> seeds;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      seeds.push_back(std::stoull(item));
    } else {
      for (auto s = std::stoull(item.substr(0, dash)); s <= std::stoull(item.substr(dash + 1));
           ++s) {
        seeds.push_back(s);
      }
    }
    pos = comma + 1;
  }
  return seeds;
}

OpCase random_case(Rng& rng, int size, const std::vector<std::string>& backends, int index) {
  static const std::vector<std::size_t> kCounts = {0, 1, 1, 7, 7, 100, 1000, 1000, 4099, 65541};
  OpCase c;
  c.op = rng.pick(tested_ops());
  c.dtype = kAllDTypes[rng.below(std::size(kAllDTypes))];
  std::vector<ReduceOp> valid;
  for (ReduceOp r : kAllReduceOps) {
    if (reduce_op_valid_for(r, c.dtype)) valid.push_back(r);
  }
  c.reduce = rng.pick(valid);
  c.count = rng.pick(kCounts);
  c.in_place = has_in_place_form(c.op) && (!has_out_of_place_form(c.op) || rng.chance(50));
  c.async = rng.chance(50);
  c.backend = rng.pick(backends);
  c.salt = index;
  c.tag = index % 30000;  // outstanding exchanges between the same pair carry different tags
  if (c.op == OpType::send) {
    c.root = size == 1 ? 0 : 1 + static_cast<int>(rng.below(static_cast<std::size_t>(size - 1)));
    if (size == 1) c.async = true;  // an exchange with itself must not block in send
  } else {
    c.root = static_cast<int>(rng.below(static_cast<std::size_t>(size)));
  }
  return c;
}

struct Outstanding {
  int index;
  std::unique_ptr<PreparedCase> op;
  std::vector<Work> works;
};

struct Stats {
  int issued = 0;
  int unsupported = 0;
  int async = 0;
  int failures = 0;
};

class SequenceRunner {
 public:
  SequenceRunner(Communicator comm, std::uint64_t seed)
      : comm_(std::move(comm)), seed_(seed), local_(seed * 0x100000001b3ull + comm_.rank() + 1) {}

  Stats run(int ops) {
    Rng shared(seed_);
    std::vector<std::string> backends = comm_.backends();
    backends.emplace_back();  // also let the runtime select
    for (int i = 0; i < ops && !broken_; ++i) {
      step(random_case(shared, comm_.size(), backends, i), i);
      // When and how many handles to complete is this rank's own choice.
      if (!pending_.empty() && (local_.chance(30) || pending_.size() > 16)) {
        complete_some(1 + local_.below(pending_.size()));
      }
    }
    if (!broken_) complete_some(pending_.size());
    return stats_;
  }

 private:
  // A wrong result is reported and the sequence goes on (every rank still issues the same
  // operations); an exception ends it, since this rank can no longer keep in step with the others.
  void fail(int index, const OpCase& c, const std::string& what) {
    if (++stats_.failures > 20) return;
    ADD_FAILURE() << fmt::format("[{}] seed {} op #{} ({}): {} (rerun: --seeds={})", rank_tag(),
                                 seed_, index, describe(c), what, seed_);
  }

  void step(const OpCase& c, int index) {
    auto op = std::make_unique<PreparedCase>(c, comm_.rank(), comm_.size());
    std::vector<Work> works;
    try {
      works = issue(comm_, *op, op->host());
    } catch (const UnsupportedError&) {
      ++stats_.unsupported;  // rank-invariant: every rank skips it
      return;
    } catch (const std::exception& e) {
      fail(index, c, fmt::format("issue raised: {}", e.what()));
      broken_ = true;
      return;
    }
    ++stats_.issued;
    if (!c.async) {
      if (auto diff = op->verify(); !diff.empty()) fail(index, c, diff);
      return;
    }
    ++stats_.async;
    pending_.push_back(Outstanding{index, std::move(op), std::move(works)});
  }

  // Completes `n` outstanding operations picked at random, each by wait() or by polling test().
  void complete_some(std::size_t n) {
    while (n-- > 0 && !pending_.empty() && !broken_) {
      const std::size_t pick = local_.below(pending_.size());
      Outstanding item = std::move(pending_[pick]);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(pick));
      const OpCase& c = item.op->spec();
      try {
        // Handles of one operation (irecv + isend) also complete in a random order.
        if (item.works.size() == 2 && local_.chance(50)) std::swap(item.works[0], item.works[1]);
        for (Work& w : item.works) {
          if (local_.chance(25)) {
            poll_until_done(w);
          } else {
            w.wait();
          }
        }
      } catch (const UnsupportedError&) {
        ++stats_.unsupported;
        continue;
      } catch (const std::exception& e) {
        fail(item.index, c, fmt::format("wait raised: {}", e.what()));
        broken_ = true;
        continue;
      }
      if (auto diff = item.op->verify(); !diff.empty()) fail(item.index, c, diff);
    }
  }

  static void poll_until_done(Work& w) {
    const auto deadline = std::chrono::steady_clock::now() + kOpTimeout;
    while (!w.test()) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(fmt::format("test() still false after {} s", kOpTimeout.count()));
      }
      std::this_thread::yield();
    }
  }

  Communicator comm_;
  std::uint64_t seed_;
  Rng local_;
  std::deque<Outstanding> pending_;
  Stats stats_;
  bool broken_ = false;
};

TEST(Mixing, RandomSequences) {
  const auto seeds = parse_seeds(option("seeds", "MCR_TEST_SEEDS", "1"));
  const int ops = std::stoi(option("ops", "MCR_TEST_OPS", "300"));
  ASSERT_FALSE(seeds.empty());
  for (std::uint64_t seed : seeds) {
    // A fresh communicator per seed: a timeout aborts its communicator, and the next seed should
    // still run.
    Communicator comm = world().split(0, world().rank());
    comm.set_timeout(kOpTimeout);
    const auto start = std::chrono::steady_clock::now();
    const Stats stats = SequenceRunner(comm, seed).run(ops);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (world().rank() == 0) {
      std::printf(
          "[ mixing ] seed %llu: %d ops on %d ranks, %d issued (%d async), %d unsupported skipped, "
          "%.1f s (rerun: --seeds=%llu)\n",
          static_cast<unsigned long long>(seed), ops, comm.size(), stats.issued, stats.async,
          stats.unsupported, seconds, static_cast<unsigned long long>(seed));
      std::fflush(stdout);
    }
    EXPECT_EQ(stats.failures, 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace mcr::test
