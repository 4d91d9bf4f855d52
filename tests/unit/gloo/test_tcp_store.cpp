// TCP store: set/get/add/check, blocking get, timeouts, many clients, and a misbehaving client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/store_exchange.hpp"
#include "bootstrap/tcp_store.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

using namespace std::chrono_literals;

Bytes bytes_of(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

// Appends instead of operator+: GCC 12 at -O3 reports a false -Wrestrict on `"lit" + string`.
std::string numbered(std::string prefix, int n) {
  prefix += std::to_string(n);
  return prefix;
}

class TcpStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> client() { return connect_tcp_store("127.0.0.1", server_.port(), 5s); }
  TcpStoreServer server_{"127.0.0.1", 0};
};

TEST_F(TcpStoreTest, EphemeralPortIsReported) {
  EXPECT_GT(server_.port(), 0);
  EXPECT_LE(server_.port(), 65535);
}

TEST_F(TcpStoreTest, SetThenGetReturnsTheSameBytes) {
  auto s = client();
  Bytes binary = {0, 1, 2, 255, 0, 128};
  s->set("binary", binary);
  s->set("empty", {});
  EXPECT_EQ(s->get("binary", 1s), binary);
  EXPECT_EQ(s->get("empty", 1s), Bytes{});
  s->set("binary", bytes_of("replaced"));
  EXPECT_EQ(s->get("binary", 1s), bytes_of("replaced"));
}

TEST_F(TcpStoreTest, LargeValueRoundTrips) {
  auto s = client();
  Bytes big(3 * 1024 * 1024 + 17);
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<std::uint8_t>(i * 131 + 7);
  s->set("big", big);
  auto other = client();
  EXPECT_EQ(other->get("big", 5s), big);
}

TEST_F(TcpStoreTest, GetWaitsForAnotherClientsSet) {
  auto waiter = client();
  auto setter = client();
  std::thread t([&] {
    std::this_thread::sleep_for(150ms);
    setter->set("late", bytes_of("here"));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(waiter->get("late", 5s), bytes_of("here"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  t.join();
}

TEST_F(TcpStoreTest, GetTimeoutRaisesTimeoutErrorNamingTheKey) {
  auto s = client();
  const auto start = std::chrono::steady_clock::now();
  try {
    s->get("never/set/key", 250ms);
    FAIL() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never/set/key"), std::string::npos) << e.what();
    EXPECT_EQ(e.backend(), "tcp_store");
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s);
  // A zero timeout is a non-blocking probe.
  EXPECT_THROW(s->get("never/set/key", 0ms), TimeoutError);
}

TEST_F(TcpStoreTest, AddCountsAtomicallyFromManyThreads) {
  constexpr int kThreads = 8;
  constexpr int kAddsEach = 50;
  std::vector<std::vector<std::int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto s = client();
      for (int i = 0; i < kAddsEach; ++i)
        seen[t].push_back(s->add("counter", 1));
    });
  }
  for (auto& t : threads)
    t.join();
  std::set<std::int64_t> all;
  for (auto& v : seen)
    all.insert(v.begin(), v.end());
  // Every add returned a distinct value, and together they are exactly 1..N.
  ASSERT_EQ(all.size(), std::size_t{kThreads * kAddsEach});
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAddsEach);
  auto s = client();
  EXPECT_EQ(s->add("counter", -10), kThreads * kAddsEach - 10);
  EXPECT_EQ(s->get("counter", 1s), bytes_of(std::to_string(kThreads * kAddsEach - 10)));
}

TEST_F(TcpStoreTest, AddOnANonIntegerValueIsAnError) {
  auto s = client();
  s->set("text", bytes_of("abc"));
  EXPECT_THROW(s->add("text", 1), BackendError);
}

TEST_F(TcpStoreTest, CheckDoesNotBlock) {
  auto s = client();
  EXPECT_FALSE(s->check({"a", "b"}));
  s->set("a", bytes_of("1"));
  EXPECT_FALSE(s->check({"a", "b"}));
  s->set("b", bytes_of("2"));
  EXPECT_TRUE(s->check({"a", "b"}));
  EXPECT_TRUE(s->check({}));
}

TEST_F(TcpStoreTest, ManyClientsExchangeThroughOneServer) {
  constexpr int kClients = 16;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kClients; ++r) {
    threads.emplace_back([&, r] {
      auto s = client();
      s->set(numbered("k/", r), bytes_of(numbered("v", r)));
      for (int o = 0; o < kClients; ++o) {
        if (s->get(numbered("k/", o), 10s) != bytes_of(numbered("v", o))) ++wrong;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(TcpStoreTest, OneClientSharedByThreadsDoesNotStarveASetter) {
  // Thread A blocks in get() on the shared connection; thread B must still get its set through.
  auto s = client();
  std::thread waiter([&] { EXPECT_EQ(s->get("shared", 5s), bytes_of("x")); });
  std::this_thread::sleep_for(50ms);
  s->set("shared", bytes_of("x"));
  waiter.join();
}

TEST_F(TcpStoreTest, GarbageFromOneConnectionDoesNotHurtOthers) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(server_.port()));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const char garbage[] = "\xff\xff\xff\xffGET / HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(fd, garbage, sizeof garbage, MSG_NOSIGNAL), 0);
  char buf[16];
  EXPECT_EQ(::recv(fd, buf, sizeof buf, 0), 0) << "the server should close the connection";
  ::close(fd);
  auto s = client();
  s->set("still", bytes_of("works"));
  EXPECT_EQ(s->get("still", 1s), bytes_of("works"));
}

TEST(TcpStoreConnect, RetriesUntilTheServerStarts) {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);
    port = probe.port();
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port);
  });
  auto s = connect_tcp_store("127.0.0.1", port, 10s);
  starter.join();
  s->set("k", bytes_of("v"));
  EXPECT_EQ(s->get("k", 1s), bytes_of("v"));
}

TEST(TcpStoreConnect, GivesUpWithTimeoutErrorNamingTheAddress) {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);
    port = probe.port();
  }
  try {
    connect_tcp_store("127.0.0.1", port, 200ms);
    FAIL() << "connected to a closed port";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(numbered("127.0.0.1:", port)), std::string::npos)
        << e.what();
  }
}

TEST(TcpStoreConnect, BadArgumentsAreRejected) {
  EXPECT_THROW(connect_tcp_store("", 1234, 1s), InvalidArgument);
  EXPECT_THROW(connect_tcp_store("127.0.0.1", 0, 1s), InvalidArgument);
  EXPECT_THROW(connect_tcp_store("127.0.0.1", 70000, 1s), InvalidArgument);
  EXPECT_THROW(TcpStoreServer("127.0.0.1", -1), InvalidArgument);
}

TEST(TcpStoreServer, PortInUseIsABackendErrorNamingBind) {
  TcpStoreServer first("127.0.0.1", 0);
  try {
    TcpStoreServer second("127.0.0.1", first.port());
    FAIL() << "two servers bound the same port";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("bind"), std::string::npos) << e.what();
  }
}

TEST(StoreExchange, AllGatherAmongThreadsInOrder) {
  TcpStoreServer server("127.0.0.1", 0);
  constexpr int kRanks = 5;
  std::vector<std::vector<std::vector<Bytes>>> results(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto store = connect_tcp_store("127.0.0.1", server.port(), 5s);
      auto exchange = make_store_exchange(*store, r, kRanks, 5s);
      for (int round = 0; round < 3; ++round) {
        // Round-dependent, rank-dependent lengths (including empty) catch key mix-ups.
        Bytes mine(static_cast<std::size_t>((r + round) % 3),
                   static_cast<std::uint8_t>(r * 10 + round));
        results[r].push_back(exchange->all_gather(mine));
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(results[r].size(), 3u);
    for (int round = 0; round < 3; ++round) {
      ASSERT_EQ(results[r][round].size(), std::size_t{kRanks});
      for (int o = 0; o < kRanks; ++o) {
        Bytes expected(static_cast<std::size_t>((o + round) % 3),
                       static_cast<std::uint8_t>(o * 10 + round));
        EXPECT_EQ(results[r][round][o], expected)
            << "rank " << r << " round " << round << " from " << o;
      }
    }
  }
}

TEST(StoreExchange, MissingPeerTimesOut) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = connect_tcp_store("127.0.0.1", server.port(), 5s);
  auto exchange = make_store_exchange(*store, 0, 2, 200ms);
  EXPECT_THROW(exchange->all_gather(bytes_of("alone")), TimeoutError);
  EXPECT_THROW(make_store_exchange(*store, 2, 2, 1s), InvalidArgument);
  EXPECT_THROW(make_store_exchange(*store, 0, 0, 1s), InvalidArgument);
}

}  // namespace
}  // namespace mcr::detail
