// The Gloo backend run as N ranks on N threads through a TCP store: the conformance cases of
// verify/conformance.hpp (every collective x dtype x count x placement x root, plus the send/recv
// exchange) driven through the backend directly and checked against the verification library's
// references, synchronously (inline fast path) and asynchronously (worker thread, waited in
// reverse order); p2p rings; strided sub-groups; timeouts; capability answers.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/gloo/gloo_address.hpp"
#include "backends/gloo/gloo_backend.hpp"
#include "mcr/errors.hpp"
#include "thread_world.hpp"
#include "verify/backend_args.hpp"
#include "verify/conformance.hpp"

namespace mcr::test {
namespace {

using namespace std::chrono_literals;
using detail::Backend;
using detail::Bootstrap;
using detail::OpArgs;

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines)
    s += l + "\n";
  return s;
}

enum class Mode { sync_inline, async_batched };

// Every reduce op at one count; sum and avg/bxor at the others keep the run short.
MatrixOptions thread_rank_options() {
  MatrixOptions o;
  o.counts = {0, 1, 7, 1000};
  o.every_reduce_op_at = {7};
  o.sync_and_async = false;  // the mode is the driver's choice here
  return o;
}

// Operations started together in async_batched mode before any is waited for.
constexpr std::size_t kBatch = 24;

// Runs `cases` on one rank; throws with the first few wrong results. A send/recv exchange always
// starts both halves asynchronously: blocking halves of a ring would wait on each other.
void run_cases(int rank, Backend& backend, const std::vector<OpCase>& cases, Mode mode,
               const std::string& where = {}) {
  std::vector<std::string> wrong;
  std::uint64_t sequence = 1;
  for (std::size_t first = 0; first < cases.size(); first += kBatch) {
    const std::size_t end = std::min(cases.size(), first + kBatch);
    std::vector<std::unique_ptr<PreparedCase>> batch;
    std::vector<std::unique_ptr<detail::PendingOp>> pending;
    for (std::size_t i = first; i < end; ++i) {
      OpCase k = cases[i];
      k.backend = backend.name();  // for the messages: the backend runs it, not a selection
      auto c = std::make_unique<PreparedCase>(k, rank, backend.size());
      for (OpArgs a : backend_args(*c, c->host(), sequence++)) {
        a.timeout = 20s;
        const bool p2p = a.op == OpType::send || a.op == OpType::recv;
        a.async = mode == Mode::async_batched || p2p;
        a.may_block = !a.async;
        if (a.async) {
          pending.push_back(backend.start(a));
        } else {
          wait_for(backend.start(a));
        }
      }
      if (mode == Mode::sync_inline) {
        for (auto& p : pending)
          wait_for(std::move(p));
        pending.clear();
      }
      batch.push_back(std::move(c));
    }
    // Waiting in reverse issue order must still complete everything.
    for (auto it = pending.rbegin(); it != pending.rend(); ++it)
      wait_for(std::move(*it));
    for (const auto& c : batch) {
      if (auto why = c->verify(); !why.empty())
        wrong.push_back(where + describe(c->spec()) + ": " + why);
    }
    if (wrong.size() > 10) throw std::runtime_error(join(wrong));
  }
  if (!wrong.empty()) throw std::runtime_error(join(wrong));
}

void run_all_collectives(int rank, Backend& backend, Mode mode) {
  const auto cases = conformance_cases(backend.size(), thread_rank_options());
  if (rank == 0)
    std::printf("[ gloo ] %zu cases per rank at %d ranks\n", cases.size(), backend.size());
  run_cases(rank, backend, cases, mode);
}

class GlooRanks : public ::testing::TestWithParam<int> {};

TEST_P(GlooRanks, EveryCollectiveDtypeCountAndPlacementSync) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    run_all_collectives(rank, b, Mode::sync_inline);
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST_P(GlooRanks, EveryCollectiveDtypeCountAndPlacementAsync) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    run_all_collectives(rank, b, Mode::async_batched);
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// An in-place f32 sum all_reduce of `data`: asynchronous, or blocking with `may_block`.
OpArgs in_place_all_reduce(std::vector<float>& data, std::uint64_t sequence,
                           std::chrono::milliseconds timeout, bool may_block = false) {
  OpArgs a;
  a.op = OpType::all_reduce;
  a.dtype = DType::f32;
  a.reduce = ReduceOp::sum;
  a.count = data.size();
  a.in = a.out = data.data();
  a.in_place = true;
  a.op_name = "all_reduce";
  a.sequence = sequence;
  a.timeout = timeout;
  a.may_block = may_block;
  a.async = !may_block;
  return a;
}

OpArgs p2p_args(OpType op, void* data, std::size_t count, int peer, int tag, bool may_block) {
  OpArgs a;
  a.op = op;
  a.dtype = DType::i32;
  a.count = count;
  a.root = peer;
  a.tag = tag;
  a.op_name = to_string(op);
  a.timeout = 20s;
  a.may_block = may_block;
  a.async = !may_block;
  if (op == OpType::send) {
    a.in = data;
  } else {
    a.out = data;
  }
  return a;
}

std::vector<std::int32_t> message(int from, int to, int tag, std::size_t n) {
  std::vector<std::int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::int32_t>(from * 1000000 + to * 10000 + tag * 100 + static_cast<int>(i));
  }
  return v;
}

TEST_P(GlooRanks, RingOfIrecvThenIsend) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    const int n = b.size();
    const int right = (rank + 1) % n;
    const int left = (rank + n - 1) % n;
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}}) {
      std::vector<std::int32_t> got(count, -1);
      auto mine = message(rank, right, 3, count);
      auto recv = b.start(p2p_args(OpType::recv, got.data(), count, left, 3, false));
      auto send = b.start(p2p_args(OpType::send, mine.data(), count, right, 3, false));
      wait_for(std::move(send));
      wait_for(std::move(recv));
      if (got != message(left, rank, 3, count)) throw std::runtime_error("ring payload wrong");
    }
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST_P(GlooRanks, BlockingSendRecvEvenOddOrder) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    const int n = b.size();
    if (n == 1) return;
    const int right = (rank + 1) % n;
    const int left = (rank + n - 1) % n;
    auto mine = message(rank, right, 1, 7);
    std::vector<std::int32_t> got(7, -1);
    // Even ranks send first, odd ranks receive first; rank n-1 of an odd ring does both last.
    if (rank % 2 == 0) {
      wait_for(b.start(p2p_args(OpType::send, mine.data(), 7, right, 1, true)));
      wait_for(b.start(p2p_args(OpType::recv, got.data(), 7, left, 1, true)));
    } else {
      wait_for(b.start(p2p_args(OpType::recv, got.data(), 7, left, 1, true)));
      wait_for(b.start(p2p_args(OpType::send, mine.data(), 7, right, 1, true)));
    }
    if (got != message(left, rank, 1, 7)) throw std::runtime_error("payload wrong");
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST_P(GlooRanks, SameTagMessagesArriveInOrderAndTagsMatchIndependently) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    const int n = b.size();
    const int right = (rank + 1) % n;
    const int left = (rank + n - 1) % n;
    // Receives posted in the order: tag 5 twice, then tag 4. Sends go out as tag 4, 5, 5.
    std::vector<std::vector<std::int32_t>> got(3, std::vector<std::int32_t>(4, -1));
    std::vector<std::unique_ptr<detail::PendingOp>> ops;
    ops.push_back(b.start(p2p_args(OpType::recv, got[0].data(), 4, left, 5, false)));
    ops.push_back(b.start(p2p_args(OpType::recv, got[1].data(), 4, left, 5, false)));
    ops.push_back(b.start(p2p_args(OpType::recv, got[2].data(), 4, left, 4, false)));
    auto a = message(rank, right, 4, 4);
    auto first5 = message(rank, right, 5, 4);
    auto second5 = message(rank, right, 50, 4);
    ops.push_back(b.start(p2p_args(OpType::send, a.data(), 4, right, 4, false)));
    ops.push_back(b.start(p2p_args(OpType::send, first5.data(), 4, right, 5, false)));
    ops.push_back(b.start(p2p_args(OpType::send, second5.data(), 4, right, 5, false)));
    for (auto& op : ops)
      wait_for(std::move(op));
    if (got[0] != message(left, rank, 5, 4) || got[1] != message(left, rank, 50, 4) ||
        got[2] != message(left, rank, 4, 4)) {
      throw std::runtime_error("tag matching or ordering wrong");
    }
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST_P(GlooRanks, PointToPointIsNotQueuedBehindCollectives) {
  // Rank 0 queues an async all_reduce, then blocks in a recv from rank 1; rank 1 sends before it
  // joins the all_reduce. Were the recv queued behind the collective, both would hang.
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    if (b.size() < 2) return;
    std::vector<float> data(16, 1.0f);
    OpArgs ar = in_place_all_reduce(data, 0, 20s);
    std::vector<std::int32_t> box(3, 0);
    if (rank == 0) {
      auto pending = b.start(ar);
      wait_for(b.start(p2p_args(OpType::recv, box.data(), 3, 1, 9, true)));
      wait_for(std::move(pending));
      if (box != message(1, 0, 9, 3)) throw std::runtime_error("p2p payload wrong");
    } else {
      if (rank == 1) {
        auto m = message(1, 0, 9, 3);
        wait_for(b.start(p2p_args(OpType::send, m.data(), 3, 0, 9, true)));
      }
      ar.async = false;
      ar.may_block = true;
      wait_for(b.start(ar));
    }
    for (float v : data) {
      if (v != static_cast<float>(b.size())) throw std::runtime_error("all_reduce wrong");
    }
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST_P(GlooRanks, SendToSelfMatchesReceiveFromSelf) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    auto m = message(rank, rank, 2, 5);
    std::vector<std::int32_t> got(5, -1);
    auto recv = b.start(p2p_args(OpType::recv, got.data(), 5, rank, 2, false));
    auto send = b.start(p2p_args(OpType::send, m.data(), 5, rank, 2, true));
    wait_for(std::move(send));
    wait_for(std::move(recv));
    if (got != m) throw std::runtime_error("self message wrong");
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// A world (or group) dropped as soon as it is created: the ranks that connect first must not
// destroy their side while a peer is still completing its handshake, or that peer's rendezvous
// fails with "connection closed by peer". Repeated, since the window is short.
TEST_P(GlooRanks, AWorldDroppedAtOnceFailsNoPeersRendezvous) {
  constexpr int kWorlds = 25;
  for (int i = 0; i < kWorlds; ++i) {
    auto failures = run_ranks(GetParam(), [](int, Backend&, Bootstrap&) {});
    ASSERT_TRUE(failures.empty()) << "world " << i << " of " << kWorlds << ":\n" << join(failures);
  }
}

TEST_P(GlooRanks, StridedSubgroupRunsItsOwnCollectives) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    const int n = b.size();
    // Even ranks, listed in reverse: the new rank is the index in this list, not rank % k.
    std::vector<int> members;
    for (int r = n - 1; r >= 0; --r) {
      if (r % 2 == 0) members.push_back(r);
    }
    auto sub = b.split(members, 4242);
    const auto me = std::find(members.begin(), members.end(), rank);
    if (me == members.end()) {
      if (sub != nullptr) throw std::runtime_error("non-member got a backend");
    } else {
      if (sub == nullptr) throw std::runtime_error("member got no backend");
      const int sub_rank = static_cast<int>(me - members.begin());
      if (sub->rank() != sub_rank || sub->size() != static_cast<int>(members.size())) {
        throw std::runtime_error("wrong sub-group rank/size");
      }
      MatrixOptions sub_options;
      sub_options.counts = {7};
      sub_options.dtypes = {DType::f32, DType::bf16, DType::i64};
      sub_options.sync_and_async = false;
      run_cases(sub_rank, *sub, conformance_cases(sub->size(), sub_options), Mode::sync_inline,
                "sub-group ");
    }
    // The parent keeps working after (and independently of) the split.
    MatrixOptions parent_options;
    parent_options.counts = {7};
    parent_options.dtypes = {DType::i32};
    parent_options.sync_and_async = false;
    run_cases(rank, b, conformance_cases(n, parent_options), Mode::async_batched, "parent ");
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// PendingOp::block(), the sleeping wait the runtime uses where nothing needs its polling: the
// caller's own gloo wait (not polled before), the pool's (polled first), a limit shorter than the
// operation's timeout, a collective taken back from the worker, and one the worker runs while the
// caller sleeps (waited before an earlier one).
void block_until_done(detail::PendingOp& op, std::chrono::milliseconds limit, const char* what) {
  if (!op.block(limit)) throw std::runtime_error(std::string(what) + ": block() declined");
  if (!op.test()) throw std::runtime_error(std::string(what) + ": not done after block()");
}

TEST_P(GlooRanks, BlockWaitsWhetherPolledFirstOrNot) {
  auto failures = run_ranks(GetParam(), [](int rank, Backend& b, Bootstrap&) {
    const int n = b.size();
    const int right = (rank + 1) % n;
    const int left = (rank + n - 1) % n;
    // (One rank sends to itself through the mailbox, which cannot sleep: the runtime polls it.)
    for (int round = 0; round < 3 && n > 1; ++round) {
      const std::size_t count = round == 0 ? 1 : 4096;
      std::vector<std::int32_t> got(count, -1);
      auto mine = message(rank, right, 9, count);
      auto recv = b.start(p2p_args(OpType::recv, got.data(), count, left, 9, false));
      auto send = b.start(p2p_args(OpType::send, mine.data(), count, right, 9, false));
      if (round == 1) (void)recv->test();  // handed to the pool before the caller waits
      // Round 2: a limit below the operation's 20 s, which must not become gloo's own timeout.
      const auto limit =
          round == 2 ? std::chrono::milliseconds(15s) : std::chrono::milliseconds(20s);
      block_until_done(*recv, limit, "recv");
      block_until_done(*send, limit, "send");
      if (got != message(left, rank, 9, count)) throw std::runtime_error("payload wrong");
    }
    // Three collectives queued on the worker; the last is waited for first (the worker runs the
    // first two while the caller sleeps), then the others.
    std::vector<std::vector<float>> data(3, std::vector<float>(1000));
    std::vector<std::unique_ptr<detail::PendingOp>> ops;
    for (std::size_t k = 0; k < data.size(); ++k) {
      std::fill(data[k].begin(), data[k].end(), static_cast<float>((rank + 1) * (k + 1)));
      ops.push_back(b.start(in_place_all_reduce(data[k], 100 + k, 20s)));
    }
    for (auto k : {2, 0, 1}) {
      if (ops[k]) block_until_done(*ops[k], 20s, "all_reduce");
    }
    // One alone: next in line, so the caller runs it itself.
    std::vector<float> alone(8, 1.0f);
    auto last = b.start(in_place_all_reduce(alone, 200, 20s));
    if (last) block_until_done(*last, 20s, "all_reduce alone");
    const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
    for (std::size_t k = 0; k < data.size(); ++k) {
      const float want = ranks_sum * static_cast<float>(k + 1);
      if (std::any_of(data[k].begin(), data[k].end(), [&](float v) { return v != want; }))
        throw std::runtime_error("all_reduce result wrong");
    }
    if (std::any_of(alone.begin(), alone.end(),
                    [&](float v) { return v != static_cast<float>(n); }))
      throw std::runtime_error("lone all_reduce result wrong");
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooRanks, ::testing::Values(1, 2, 3, 4),
                         [](const auto& param_info) {
                           return std::to_string(param_info.param) + "ranks";
                         });

// ---- timeouts
// ------------------------------------------------------------------------------------

OpArgs lonely_all_reduce(std::vector<float>& data, bool may_block) {
  return in_place_all_reduce(data, 77, 300ms, may_block);
}

void expect_timeout_names_op(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
    throw std::runtime_error("all_reduce without a peer completed");
  } catch (const TimeoutError& e) {
    if (e.op() != "all_reduce" || e.sequence() != 77 || e.backend() != "gloo") {
      throw std::runtime_error(std::string("TimeoutError fields wrong: ") + e.what());
    }
  }
  if (std::chrono::steady_clock::now() - start > 10s) throw std::runtime_error("timeout too late");
}

TEST(GlooTimeout, InlineCollectiveWithoutPeerRaisesTimeoutError) {
  std::barrier done(2);
  auto failures = run_ranks(2, [&](int rank, Backend& b, Bootstrap&) {
    if (rank == 0) {
      std::vector<float> data(8, 1.0f);
      expect_timeout_names_op([&] { wait_for(b.start(lonely_all_reduce(data, true))); });
    }
    done.arrive_and_wait();  // rank 1 never joins the all_reduce
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(GlooTimeout, QueuedCollectiveWithoutPeerFailsItsHandle) {
  std::barrier done(2);
  auto failures = run_ranks(2, [&](int rank, Backend& b, Bootstrap&) {
    if (rank == 0) {
      std::vector<float> data(8, 1.0f);
      expect_timeout_names_op([&] { wait_for(b.start(lonely_all_reduce(data, false))); });
    }
    done.arrive_and_wait();
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(GlooTimeout, UnmatchedReceiveTimesOut) {
  std::barrier done(2);
  auto failures = run_ranks(2, [&](int rank, Backend& b, Bootstrap&) {
    if (rank == 0) {
      std::vector<std::int32_t> box(4);
      auto args = p2p_args(OpType::recv, box.data(), 4, 1, 0, false);
      args.timeout = 300ms;
      args.sequence = 5;
      try {
        wait_for(b.start(args));
        throw std::runtime_error("receive without a sender completed");
      } catch (const TimeoutError& e) {
        if (e.op() != "recv" || e.sequence() != 5 || e.backend() != "gloo") {
          throw std::runtime_error(std::string("TimeoutError fields wrong: ") + e.what());
        }
      }
    }
    done.arrive_and_wait();
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// A receive (or send) given up before its peer came stays posted in gloo's connection: gloo cannot
// take it back. When the peer's message comes late, it must complete into the kept buffer and the
// connection must go on: before, the freed buffer left the message unread, gloo's I/O thread spun
// on it, and every later message between the two ranks waited behind it for ever.
TEST(GlooAbandoned, ALateMessageForAGivenUpReceiveLeavesTheConnectionWorking) {
  std::barrier step(2);
  auto failures = run_ranks(2, [&](int rank, Backend& b, Bootstrap&) {
    const auto late = message(1, 0, 6, 4);
    const auto next = message(1, 0, 7, 4);
    if (rank == 0) {
      std::vector<std::int32_t> box(4, -1);
      auto given_up = b.start(p2p_args(OpType::recv, box.data(), 4, 1, 6, false));
      (void)given_up->test();  // polled once: a pool thread waits for it, as in the runtime
      std::this_thread::sleep_for(100ms);
      given_up->abandon();
      given_up.reset();
      step.arrive_and_wait();  // 1: rank 1 sends the late message now
      step.arrive_and_wait();  // 2: it was sent
      std::vector<std::int32_t> got(4, -1);
      auto args = p2p_args(OpType::recv, got.data(), 4, 1, 6, false);
      args.timeout = 5s;
      wait_for(b.start(args), 6s);
      if (got != next) throw std::runtime_error("the next message on the connection is wrong");
      if (box != late) throw std::runtime_error("the late message did not reach the kept buffer");
    } else {
      step.arrive_and_wait();
      wait_for(
          b.start(p2p_args(OpType::send, const_cast<std::int32_t*>(late.data()), 4, 0, 6, true)));
      step.arrive_and_wait();
      wait_for(
          b.start(p2p_args(OpType::send, const_cast<std::int32_t*>(next.data()), 4, 0, 6, true)));
    }
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// The same for a send given up before its receiver came: the receiver's late receive gets the
// kept message, and the connection goes on (before, gloo's I/O thread could never write it and
// every later send to that rank queued behind it).
TEST(GlooAbandoned, ALateReceiveForAGivenUpSendLeavesTheConnectionWorking) {
  std::barrier step(2);
  auto failures = run_ranks(2, [&](int rank, Backend& b, Bootstrap&) {
    auto late = message(0, 1, 6, 4);
    auto next = message(0, 1, 7, 4);
    if (rank == 0) {
      auto given_up = b.start(p2p_args(OpType::send, late.data(), 4, 1, 6, false));
      (void)given_up->test();
      std::this_thread::sleep_for(100ms);
      given_up->abandon();
      given_up.reset();
      step.arrive_and_wait();  // 1: rank 1 receives now
      auto args = p2p_args(OpType::send, next.data(), 4, 1, 6, false);
      args.timeout = 5s;
      wait_for(b.start(args), 6s);
      step.arrive_and_wait();  // 2
    } else {
      step.arrive_and_wait();
      std::vector<std::int32_t> first(4, -1);
      std::vector<std::int32_t> second(4, -1);
      auto a1 = p2p_args(OpType::recv, first.data(), 4, 0, 6, false);
      auto a2 = p2p_args(OpType::recv, second.data(), 4, 0, 6, false);
      a1.timeout = a2.timeout = 5s;
      wait_for(b.start(a1), 6s);
      wait_for(b.start(a2), 6s);
      step.arrive_and_wait();
      if (first != late) throw std::runtime_error("the given-up send's message is wrong");
      if (second != next) throw std::runtime_error("the next message on the connection is wrong");
    }
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// ---- capabilities
// --------------------------------------------------------------------------------

TEST(GlooSupports, AnswersPreciselyPerOpDtypeReduceAndDevice) {
  auto failures = run_ranks(1, [](int, Backend& b, Bootstrap&) {
    auto fail = [](const std::string& what) { throw std::runtime_error(what); };
    if (b.name() != "gloo") fail("name");
    for (OpType op : kAllOpTypes) {
      for (DType t : kAllDTypes) {
        for (ReduceOp r : kAllReduceOps) {
          const auto s = b.supports(op, t, r, Device::Kind::cpu);
          const bool want = !is_reduction(op) || reduce_op_valid_for(r, t);
          if (s.ok != want) {
            fail(std::string("cpu ") + std::string(to_string(op)) + " " +
                 std::string(to_string(t)) + " " + std::string(to_string(r)));
          }
          if (s.ok && op == OpType::reduce_scatter && s.how != "emulated")
            fail("reduce_scatter how");
          if (!s.ok && s.why.empty()) fail("no reason given");
          if (b.supports(op, t, r, Device::Kind::cuda).ok) fail("cuda accepted");
        }
      }
    }
  });
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(GlooFactory, IsNamedGlooAndAlwaysUsable) {
  auto f = detail::gloo_backend_factory();
  EXPECT_EQ(f.name, "gloo");
  detail::LaunchInfo launch;
  detail::Bootstrap bootstrap(launch, nullptr, nullptr, 1s);
  EXPECT_EQ(f.unusable_reason(bootstrap), "");
}

TEST(GlooHostname, LoopbackWhenAllRanksAreLocalElseOverridable) {
  detail::LaunchInfo launch;
  launch.size = 4;
  launch.local_size = 4;
  launch.single_host = true;
  ::unsetenv("MCR_GLOO_HOSTNAME");
  EXPECT_EQ(detail::gloo_hostname(launch), "127.0.0.1");
  // The launcher counts every rank as local, but the host identities differ (separate network
  // namespaces): loopback would not reach the others.
  launch.single_host = false;
  EXPECT_NE(detail::gloo_hostname(launch), "127.0.0.1");
  ::setenv("MCR_GLOO_HOSTNAME", "node7.example", 1);
  EXPECT_EQ(detail::gloo_hostname(launch), "node7.example");
  ::unsetenv("MCR_GLOO_HOSTNAME");
}

TEST(GlooInline, OnByDefaultOffOnlyWhenAsked) {
  ::unsetenv("MCR_GLOO_INLINE");
  EXPECT_TRUE(detail::gloo_runs_inline());
  ::setenv("MCR_GLOO_INLINE", "1", 1);
  EXPECT_TRUE(detail::gloo_runs_inline());
  ::setenv("MCR_GLOO_INLINE", "0", 1);
  EXPECT_FALSE(detail::gloo_runs_inline());
  ::setenv("MCR_GLOO_INLINE", "yes", 1);
  try {
    detail::gloo_runs_inline();
    ADD_FAILURE() << "MCR_GLOO_INLINE=yes was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("MCR_GLOO_INLINE='yes': must be 1"), std::string::npos)
        << e.what();
  }
  ::unsetenv("MCR_GLOO_INLINE");
}

TEST(GlooHostname, InterfaceNamedByMcrGlooIface) {
  detail::LaunchInfo launch;
  launch.size = 4;
  launch.local_size = 1;
  ::setenv("MCR_GLOO_IFACE", "lo", 1);
  EXPECT_EQ(detail::gloo_hostname(launch), "127.0.0.1");
  ::setenv("MCR_GLOO_IFACE", "nosuchif9", 1);
  try {
    detail::gloo_hostname(launch);
    ADD_FAILURE() << "an unknown interface was accepted";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("MCR_GLOO_IFACE='nosuchif9'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lo"), std::string::npos) << msg;  // the interfaces that exist are listed
  }
  ::unsetenv("MCR_GLOO_IFACE");
}

// MCR_STORE_HOST names the interface other hosts reach this one through (eth0, ib0), on every
// rank. Gloo advertises that interface's address, not whichever one the host name or the default
// route gives. Run by `gloo.store_host_interface` in a network namespace of its own with two
// interfaces, a0 (10.77.0.1) and b0 (10.78.0.1), which only it sees.
TEST(GlooHostnameNetns, StoreHostNamingAnInterfaceIsThatInterfacesAddress) {
  if (std::getenv("MCR_TEST_TWO_INTERFACES") == nullptr) {
    GTEST_SKIP() << "run by the ctest gloo.store_host_interface, which creates the interfaces";
  }
  detail::LaunchInfo launch;
  launch.size = 4;
  launch.local_size = 2;
  ::setenv("MCR_STORE_HOST", "a0", 1);
  EXPECT_EQ(detail::gloo_hostname(launch), "10.77.0.1");
  ::setenv("MCR_STORE_HOST", "b0", 1);
  EXPECT_EQ(detail::gloo_hostname(launch), "10.78.0.1");
  ::unsetenv("MCR_STORE_HOST");
}

TEST(GlooHostname, NeverLoopbackAcrossHosts) {
  detail::LaunchInfo launch;
  launch.size = 4;
  launch.local_size = 2;
  // A store on this host gives a loopback route: not an address other hosts could use.
  ::setenv("MCR_STORE_HOST", "127.0.0.1", 1);
  const std::string chosen = detail::gloo_hostname(launch);
  ::unsetenv("MCR_STORE_HOST");
  const auto resolved = detail::resolve_ipv4(chosen);
  ASSERT_TRUE(resolved.has_value()) << chosen;
  if (detail::first_external_address()) {
    EXPECT_FALSE(detail::is_loopback_ipv4(*resolved)) << chosen;
  }
}

}  // namespace
}  // namespace mcr::test
