// The Gloo backend's collective threads (GlooWorker): collectives start in issue order, at most the
// configured number run at once, and a caller may run one itself only when that keeps both rules.
// MCR_GLOO_THREADS is parsed with a clear error.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/gloo/gloo_backend.hpp"
#include "backends/gloo/gloo_worker.hpp"
#include "mcr/errors.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;
using detail::GlooWorker;

// What the tasks of one test saw: the order they started in, how many ran at once at most, and a
// gate that holds them until the test opens it.
struct Probe {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> started;
  int running = 0;
  int most = 0;
  int finished = 0;
  bool open = false;

  GlooWorker::Task task(int id) {
    return [this, id](bool cancelled) {
      std::unique_lock lock(mu);
      if (!cancelled) {
        started.push_back(id);
        most = std::max(most, ++running);
        cv.notify_all();
        cv.wait_for(lock, 20s, [&] { return open; });
        --running;
      }
      ++finished;
      cv.notify_all();
    };
  }
  // Waits until `n` tasks have started (false after 20 s).
  bool wait_started(std::size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return started.size() >= n; });
  }
  bool wait_finished(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return finished >= n; });
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(GlooWorker, StartsInIssueOrderAndRunsAtMostItsThreadsAtOnce) {
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    Probe probe;
    GlooWorker worker(threads);
    constexpr int kTasks = 7;
    for (int i = 0; i < kTasks; ++i)
      worker.submit(probe.task(i));
    // Exactly `threads` start while the gate is shut: the collectives run side by side.
    ASSERT_TRUE(probe.wait_started(static_cast<std::size_t>(threads)));
    std::this_thread::sleep_for(50ms);  // a thread too many would start within this
    {
      // The first `threads` in issue order, in whatever order their threads reached the probe.
      std::lock_guard lock(probe.mu);
      std::vector<int> first = probe.started;
      std::sort(first.begin(), first.end());
      std::vector<int> want(static_cast<std::size_t>(threads));
      for (int i = 0; i < threads; ++i)
        want[static_cast<std::size_t>(i)] = i;
      EXPECT_EQ(first, want);
    }
    probe.release();
    ASSERT_TRUE(probe.wait_finished(kTasks));
    EXPECT_EQ(probe.most, threads);
    if (threads == 1) {
      EXPECT_EQ(probe.started, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
    }
  }
}

TEST(GlooWorker, CallerRunsOnlyWhenNothingQueuedAndASlotIsFree) {
  Probe probe;
  GlooWorker worker(2);
  int key_a = 0;
  int key_b = 0;
  worker.submit(probe.task(0), &key_a);
  ASSERT_TRUE(probe.wait_started(1));
  // One slot free, nothing queued: the caller may run now.
  bool ran = false;
  EXPECT_TRUE(worker.run_now_if_free([&] { ran = true; }));
  EXPECT_TRUE(ran);
  worker.submit(probe.task(1), &key_b);
  ASSERT_TRUE(probe.wait_started(2));
  // Both slots taken: neither a new collective nor a queued one may start in the caller.
  EXPECT_FALSE(worker.run_now_if_free([] { ADD_FAILURE() << "ran with every slot taken"; }));
  int key_c = 0;
  worker.submit(probe.task(2), &key_c);
  EXPECT_FALSE(worker.run_if_next(&key_c));
  probe.release();
  ASSERT_TRUE(probe.wait_finished(3));
  EXPECT_EQ(probe.started, (std::vector<int>{0, 1, 2}));
}

TEST(GlooWorker, RunIfNextTakesOnlyTheFrontOfTheQueue) {
  Probe probe;
  GlooWorker worker(1);
  int first = 0;
  int second = 0;
  int third = 0;
  worker.submit(probe.task(0), &first);
  ASSERT_TRUE(probe.wait_started(1));
  worker.submit(probe.task(1), &second);
  worker.submit(probe.task(2), &third);
  EXPECT_FALSE(worker.run_if_next(&second));  // the one thread is busy
  probe.release();
  ASSERT_TRUE(probe.wait_finished(3));
  EXPECT_EQ(probe.started, (std::vector<int>{0, 1, 2}));
}

TEST(GlooWorker, AnExceptionFromTheCallersRunFreesItsSlot) {
  GlooWorker worker(1);
  EXPECT_THROW(worker.run_now_if_free([] { throw std::runtime_error("gloo failed"); }),
               std::runtime_error);
  bool ran = false;
  EXPECT_TRUE(worker.run_now_if_free([&] { ran = true; }));
  EXPECT_TRUE(ran);
}

TEST(GlooWorker, QueuedTasksAreCancelledAtShutdown) {
  Probe probe;
  {
    GlooWorker worker(1);
    worker.submit(probe.task(0));
    ASSERT_TRUE(probe.wait_started(1));
    worker.submit(probe.task(1));
    worker.submit(probe.task(2));
    probe.release();  // the running one finishes; the destructor may cancel the rest
  }
  EXPECT_EQ(probe.finished, 3);  // every task ran or learnt that it was cancelled
  EXPECT_EQ(probe.started.front(), 0);
}

TEST(GlooThreads, TwoByDefaultAndOnlyAWholeNumberFromOneTo64) {
  ::unsetenv("MCR_GLOO_THREADS");
  EXPECT_EQ(detail::gloo_collective_threads(), 2);
  ::setenv("MCR_GLOO_THREADS", "1", 1);
  EXPECT_EQ(detail::gloo_collective_threads(), 1);
  ::setenv("MCR_GLOO_THREADS", "64", 1);
  EXPECT_EQ(detail::gloo_collective_threads(), 64);
  for (const char* bad : {"0", "65", "-1", "2x", "two"}) {
    ::setenv("MCR_GLOO_THREADS", bad, 1);
    try {
      detail::gloo_collective_threads();
      ADD_FAILURE() << "MCR_GLOO_THREADS=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("MCR_GLOO_THREADS='") + bad +
                                           "': must be a whole number of worker threads from 1 "
                                           "to 64"),
                std::string::npos)
          << e.what();
    }
  }
  ::unsetenv("MCR_GLOO_THREADS");
}

}  // namespace
}  // namespace mcr::test
