// Randomized mixing test: long random sequences of operations over every backend, sync and async,
// with async handles completed in a per-rank random order, each result verified.
//
// Every rank derives the same sequence of operations from the seed (the communicator contract);
// only when and in which order each rank waits for its outstanding handles differs per rank (a
// second generator seeded with seed and rank). A per-operation timeout makes a stalled run fail
// with mcr::TimeoutError instead of hanging.
//
// RandomSequencesWithGroups also forms communicators in the middle of the sequence, while
// operations of the parent are in flight, by each of the three ways (split, new_group over the
// parent, member_group by the members alone), runs a few random operations on each (only its
// members issue them) and leaves them in flight beside the parent's: communicator creation is
// collective in the libraries too, and must agree with what each rank has started before it.
//
// Seeds: --seeds=1-8 or --seeds=3,7 (or MCR_TEST_SEEDS); --ops=N (MCR_TEST_OPS, default 300).
// Every failure message names the seed and the operation index: rerun with --seeds=<seed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  Communicator comm;  // where it runs: the sequence's communicator or one formed on the way
  std::unique_ptr<PreparedCase> op;
  std::vector<Work> works;
};

struct Stats {
  int issued = 0;
  int unsupported = 0;
  int async = 0;
  int failures = 0;
  std::array<int, 3> groups{};  // formed by split, new_group, member_group (this rank a member)
};

// The ways a communicator is formed in a group phase.
enum class Formation { split, new_group, member_group };
constexpr std::array<const char*, 3> kFormationNames = {"split", "new_group", "member_group"};

class SequenceRunner {
 public:
  /// `group_percent`: the chance, before each operation, of a group phase (0: none, and the
  /// sequence of a seed is the one it always was).
  SequenceRunner(Communicator comm, std::uint64_t seed, int group_percent = 0)
      : comm_(std::move(comm)),
        seed_(seed),
        group_percent_(group_percent),
        local_(seed * 0x100000001b3ull + comm_.rank() + 1) {}

  Stats run(int ops) {
    Rng shared(seed_);
    std::vector<std::string> backends = comm_.backends();
    backends.emplace_back();  // also let the runtime select
    for (int i = 0; i < ops && !broken_; ++i) {
      if (group_percent_ > 0 && shared.chance(group_percent_)) group_phase(shared, backends, i);
      if (broken_) break;
      step(comm_, random_case(shared, comm_.size(), backends, i), i);
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

  // Forms a communicator of a random subset of the ranks, in a random order, with this rank's
  // operations still in flight, and runs 1-6 random operations on it. Every rank draws the same
  // numbers, members or not, so that the shared sequence stays in step.
  void group_phase(Rng& shared, const std::vector<std::string>& backends, int index) {
    const int n = comm_.size();
    const auto how = static_cast<Formation>(shared.below(3));
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    for (std::size_t i = order.size(); i > 1; --i)  // Fisher-Yates on the shared generator
      std::swap(order[i - 1], order[shared.below(i)]);
    const std::vector<int> members(
        order.begin(),
        order.begin() + 1 + static_cast<std::ptrdiff_t>(shared.below(static_cast<std::size_t>(n))));
    const auto mine = std::find(members.begin(), members.end(), comm_.rank());
    const bool member = mine != members.end();
    const int sub_ops = 1 + static_cast<int>(shared.below(6));
    std::vector<OpCase> cases;
    for (int k = 0; k < sub_ops; ++k) {
      OpCase c = random_case(shared, static_cast<int>(members.size()), backends, index);
      c.salt = 1000000 + index * 8 + k;
      c.tag = (index * 8 + k) % 30000;
      cases.push_back(c);
    }
    const std::string what =
        fmt::format("{} of ranks [{}] before op #{}", kFormationNames[static_cast<int>(how)],
                    fmt::join(members, ","), index);
    Communicator sub;
    try {
      switch (how) {
        case Formation::split:
          sub = comm_.split(member ? 0 : Communicator::kUndefinedColor,
                            member ? static_cast<int>(mine - members.begin()) : 0);
          break;
        case Formation::new_group:
          sub = comm_.new_group(members);
          break;
        case Formation::member_group:
          if (member) sub = comm_.member_group(members, fmt::format("mixing-{}", index));
          break;
      }
    } catch (const std::exception& e) {
      fail(index, cases.front(), fmt::format("{} raised: {}", what, e.what()));
      broken_ = true;
      return;
    }
    if (sub.valid() != member) {
      fail(index, cases.front(),
           fmt::format("{}: this rank {} a member but got {} communicator", what,
                       member ? "is" : "is not", sub.valid() ? "a" : "no"));
      broken_ = true;
      return;
    }
    if (!member) return;
    if (sub.size() != static_cast<int>(members.size()) ||
        sub.rank() != static_cast<int>(mine - members.begin())) {
      fail(index, cases.front(),
           fmt::format("{}: rank {} of {} in it, expected {} of {}", what, sub.rank(), sub.size(),
                       mine - members.begin(), members.size()));
      broken_ = true;
      return;
    }
    ++stats_.groups[static_cast<std::size_t>(how)];
    sub.set_timeout(kOpTimeout);
    for (const OpCase& c : cases) {
      if (broken_) return;
      step(sub, c, index);
    }
  }

  void step(Communicator comm, const OpCase& c, int index) {
    auto op = std::make_unique<PreparedCase>(c, comm.rank(), comm.size());
    std::vector<Work> works;
    try {
      works = issue(comm, *op, op->host());
    } catch (const UnsupportedError& e) {
      // A host library forced for host memory runs every case here: a refusal is an error.
      if (c.backend == "mpi" || c.backend == "gloo") fail(index, c, e.what());
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
    pending_.push_back(Outstanding{index, comm, std::move(op), std::move(works)});
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
      } catch (const UnsupportedError& e) {
        if (c.backend == "mpi" || c.backend == "gloo") fail(item.index, c, e.what());
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
  int group_percent_;
  Rng local_;
  std::deque<Outstanding> pending_;
  Stats stats_;
  bool broken_ = false;
};

// Runs the sequence of every seed given (--seeds) on a fresh communicator (a timeout aborts its
// communicator, and the next seed should still run); `report` prints a seed's line.
template <class Report>
void run_seeds(int group_percent, Report report) {
  const auto seeds = parse_seeds(option("seeds", "MCR_TEST_SEEDS", "1"));
  const int ops = std::stoi(option("ops", "MCR_TEST_OPS", "300"));
  ASSERT_FALSE(seeds.empty());
  for (std::uint64_t seed : seeds) {
    Communicator comm = world().split(0, world().rank());
    comm.set_timeout(kOpTimeout);
    const auto start = std::chrono::steady_clock::now();
    const Stats stats = SequenceRunner(comm, seed, group_percent).run(ops);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report(static_cast<unsigned long long>(seed), ops, comm, stats, seconds);
    std::fflush(stdout);
    EXPECT_EQ(stats.failures, 0) << "seed " << seed;
  }
}

TEST(Mixing, RandomSequences) {
  run_seeds(0, [](unsigned long long seed, int ops, const Communicator& comm, const Stats& stats,
                  double seconds) {
    if (world().rank() != 0) return;
    std::printf(
        "[ mixing ] seed %llu: %d ops on %d ranks, %d issued (%d async), %d unsupported skipped, "
        "%.1f s (rerun: --seeds=%llu)\n",
        seed, ops, comm.size(), stats.issued, stats.async, stats.unsupported, seconds, seed);
  });
}

TEST(Mixing, RandomSequencesWithGroups) {
  run_seeds(5, [](unsigned long long seed, int ops, const Communicator&, const Stats& stats,
                  double seconds) {
    std::printf(
        "[ mixing with groups ] %s seed %llu: %d ops, %d issued here (%d async), %d unsupported "
        "skipped; member of %d split, %d new_group, %d member_group communicators; %.1f s "
        "(rerun: --seeds=%llu)\n",
        rank_tag().c_str(), seed, ops, stats.issued, stats.async, stats.unsupported,
        stats.groups[0], stats.groups[1], stats.groups[2], seconds, seed);
  });
}

}  // namespace
}  // namespace mcr::test
