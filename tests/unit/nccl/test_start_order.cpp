// The staging wrapper's start queue (device/start_order.hpp): operations reach the library in the
// order they were called, whatever order their inputs become ready in. Host code, no GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/start_order.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::device {
namespace {

class DonePendingOp final : public PendingOp {
 public:
  explicit DonePendingOp(int which) : id(which) {}
  bool test() override { return true; }
  int id;
};

// Operations 0 .. n-1 queued in that order; each starts only once `ready[i]` is set, and records
// itself in `started` when it does.
struct Queue {
  explicit Queue(int n) : ready(n, false) {
    for (int i = 0; i < n; ++i) {
      tickets.push_back(order.enqueue([this, i] { return static_cast<bool>(ready[i]); },
                                      [this, i] {
                                        started.push_back(i);
                                        return std::make_unique<DonePendingOp>(i);
                                      }));
    }
  }
  StartOrder order;
  std::vector<char> ready;
  std::vector<int> started;
  std::vector<std::shared_ptr<StartOrder::Ticket>> tickets;
};

TEST(StartOrder, StartsInCallOrderWhateverOrderInputsArrive) {
  Queue q(4);
  q.ready[3] = true;  // the last one called is ready first: it must wait for the others
  q.order.advance();
  EXPECT_TRUE(q.started.empty());
  q.ready[1] = true;
  q.order.advance();
  EXPECT_TRUE(q.started.empty());
  q.ready[0] = true;
  q.order.advance();
  EXPECT_EQ(q.started, (std::vector<int>{0, 1}));
  std::unique_ptr<PendingOp> op;
  EXPECT_FALSE(q.order.collect(*q.tickets[2], op));
  q.ready[2] = true;
  q.order.advance();
  EXPECT_EQ(q.started, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(q.order.idle());
}

TEST(StartOrder, CollectHandsOverWhatStartReturnedOnce) {
  Queue q(1);
  std::unique_ptr<PendingOp> op;
  EXPECT_FALSE(q.order.collect(*q.tickets[0], op));
  q.ready[0] = true;
  q.order.advance();
  ASSERT_TRUE(q.order.collect(*q.tickets[0], op));
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(dynamic_cast<DonePendingOp&>(*op).id, 0);
  std::unique_ptr<PendingOp> again;
  EXPECT_TRUE(q.order.collect(*q.tickets[0], again));
  EXPECT_EQ(again, nullptr);  // already handed over
}

TEST(StartOrder, StartIfIdleRunsOnlyWhenNothingWaits) {
  StartOrder order;
  std::unique_ptr<PendingOp> op;
  int calls = 0;
  auto start = [&] {
    ++calls;
    return std::make_unique<DonePendingOp>(7);
  };
  ASSERT_TRUE(order.start_if_idle(start, op));
  EXPECT_EQ(calls, 1);
  ASSERT_NE(op, nullptr);

  bool ready = false;
  auto waiting = order.enqueue([&] { return ready; }, [] { return std::unique_ptr<PendingOp>(); });
  op.reset();
  EXPECT_FALSE(order.start_if_idle(start, op));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(op, nullptr);
  ready = true;
  order.advance();
  EXPECT_TRUE(order.start_if_idle(start, op));
  EXPECT_EQ(calls, 2);
}

TEST(StartOrder, AnEmptyReadyIsReadyAtOnceButStillWaitsItsTurn) {
  StartOrder order;
  bool first_ready = false;
  std::vector<int> started;
  auto first = order.enqueue([&] { return first_ready; },
                             [&] {
                               started.push_back(0);
                               return std::unique_ptr<PendingOp>();
                             });
  auto second = order.enqueue({}, [&] {
    started.push_back(1);
    return std::unique_ptr<PendingOp>();
  });
  order.advance();
  EXPECT_TRUE(started.empty());
  first_ready = true;
  order.advance();
  EXPECT_EQ(started, (std::vector<int>{0, 1}));
  std::unique_ptr<PendingOp> op;
  EXPECT_TRUE(order.collect(*second, op));
  EXPECT_EQ(op, nullptr);  // null: it completed inside its start
}

// The message of the error collect() raises for `ticket`.
std::string collect_error(StartOrder& order, StartOrder::Ticket& ticket) {
  std::unique_ptr<PendingOp> op;
  try {
    order.collect(ticket, op);
  } catch (const BackendError& e) {
    return e.what();
  }
  return "(no error)";
}

// An operation that fails to start on this rank may have started on its peers: one behind it,
// started here, would be matched with theirs (MPI by start order, Gloo by tag). So the failure
// goes to its owner, and every operation behind it, or called later, fails with the reason.
TEST(StartOrder, AFailureGoesToItsOwnerAndNothingStartsInItsPlace) {
  StartOrder order;
  std::vector<int> started;
  auto first = order.enqueue({}, [&] {
    started.push_back(0);
    return std::unique_ptr<PendingOp>();
  });
  auto bad_ready = order.enqueue([]() -> bool { throw BackendError("event query failed"); },
                                 [] { return std::unique_ptr<PendingOp>(); });
  auto behind = order.enqueue({}, [&] {
    started.push_back(2);
    return std::unique_ptr<PendingOp>();
  });
  order.advance();
  EXPECT_EQ(started, (std::vector<int>{0}));
  EXPECT_TRUE(order.idle());
  std::unique_ptr<PendingOp> op;
  EXPECT_TRUE(order.collect(*first, op));
  EXPECT_EQ(collect_error(order, *bad_ready), "event query failed");
  EXPECT_EQ(collect_error(order, *bad_ready), "event query failed");  // every time it is asked
  const std::string why = collect_error(order, *behind);
  EXPECT_NE(why.find("an operation called before it did not start: event query failed"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("would have been matched"), std::string::npos) << why;
  // Later operations too, queued or started at once.
  auto later = order.enqueue({}, [&] {
    started.push_back(3);
    return std::unique_ptr<PendingOp>();
  });
  order.advance();
  EXPECT_EQ(collect_error(order, *later), why);
  EXPECT_THROW(order.start_if_idle([&] { return std::unique_ptr<PendingOp>(); }, op), BackendError);
  EXPECT_EQ(started, (std::vector<int>{0}));
  EXPECT_THROW(order.throw_if_broken(), BackendError);  // a split would be matched wrongly too
  StartOrder fine;
  EXPECT_NO_THROW(fine.throw_if_broken());
}

TEST(StartOrder, AFailingStartLosesTheOrderToo) {
  StartOrder order;
  auto bad_start = order.enqueue(
      {}, []() -> std::unique_ptr<PendingOp> { throw BackendError("library refused"); });
  bool ran = false;
  auto behind = order.enqueue({}, [&] {
    ran = true;
    return std::unique_ptr<PendingOp>();
  });
  order.advance();
  EXPECT_FALSE(ran);
  EXPECT_EQ(collect_error(order, *bad_start), "library refused");
  EXPECT_NE(collect_error(order, *behind).find("did not start: library refused"),
            std::string::npos);
}

// A waiting operation given up (its wait timed out) never starts, and neither does any behind it:
// they fail with the reason instead of moving up into its place.
TEST(StartOrder, CancelledOperationsNeverStartAndNothingMovesUpIntoTheirPlace) {
  Queue q(4);
  q.ready[0] = true;
  q.order.advance();
  EXPECT_EQ(q.started, (std::vector<int>{0}));
  q.order.cancel(*q.tickets[0]);  // started already: nothing to take out, nothing lost
  q.order.cancel(*q.tickets[2]);
  q.ready[1] = true;
  q.ready[3] = true;
  q.order.advance();
  EXPECT_EQ(q.started, (std::vector<int>{0, 1}));  // 1 was before the cancelled one
  EXPECT_TRUE(q.order.idle());
  std::unique_ptr<PendingOp> op;
  EXPECT_TRUE(q.order.collect(*q.tickets[1], op));
  EXPECT_FALSE(q.order.collect(*q.tickets[2], op));  // its owner gave it up: nothing to report
  EXPECT_NE(collect_error(q.order, *q.tickets[3]).find("was given up before it started"),
            std::string::npos);
}

TEST(StartOrder, CloseFailsWhatWaitsWithTheReason) {
  Queue q(2);
  q.ready[0] = true;
  q.order.advance();
  q.order.close("the communicator was destroyed");
  EXPECT_TRUE(q.order.idle());
  q.ready[1] = true;
  q.order.advance();
  EXPECT_EQ(q.started, (std::vector<int>{0}));
  std::unique_ptr<PendingOp> op;
  EXPECT_TRUE(q.order.collect(*q.tickets[0], op));
  try {
    q.order.collect(*q.tickets[1], op);
    ADD_FAILURE() << "collect of a closed operation did not raise";
  } catch (const BackendError& e) {
    EXPECT_STREQ(e.what(), "the communicator was destroyed");
  }
}

// Seeded: operations become ready in a random order, interleaved with advances and with
// operations that are ready at once; the start order is always the call order, and each starts
// as soon as it and every earlier one are ready.
TEST(StartOrder, RandomReadinessNeverReordersStarts) {
  const unsigned seed = 20261205u;
  std::cout << "start order seed " << seed << "\n";
  std::mt19937 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<char> ready(n, false);
    std::vector<int> started;
    StartOrder order;
    for (int i = 0; i < n; ++i) {
      StartOrder::Ready r;
      if (rng() % 3 == 0) {
        ready[i] = true;
      } else {
        r = [&ready, i] { return static_cast<bool>(ready[i]); };
      }
      (void)order.enqueue(std::move(r), [&started, i] {
        started.push_back(i);
        return std::unique_ptr<PendingOp>();
      });
      if (rng() % 4 == 0) order.advance();
    }
    std::vector<int> arrival(n);
    std::iota(arrival.begin(), arrival.end(), 0);
    std::shuffle(arrival.begin(), arrival.end(), rng);
    for (int i : arrival) {
      ready[i] = true;
      order.advance();
      // Everything up to the first operation not yet ready has started, nothing beyond it.
      const int prefix =
          static_cast<int>(std::find(ready.begin(), ready.end(), false) - ready.begin());
      std::vector<int> expected(prefix);
      std::iota(expected.begin(), expected.end(), 0);
      ASSERT_EQ(started, expected) << "seed " << seed << " round " << round;
    }
    ASSERT_TRUE(order.idle()) << "seed " << seed << " round " << round;
  }
}

}  // namespace
}  // namespace mcr::detail::device
