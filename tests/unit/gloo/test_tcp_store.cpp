// TCP store: set/get/add/check, blocking get, timeouts, many clients, and a misbehaving client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/store_exchange.hpp"
#include "bootstrap/store_wire.hpp"
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

// A token and job id too long for the store's hello: the server dropped it unanswered, which the
// client took for a busy server and retried until its timeout. Refused before it is sent.
TEST(TcpStoreConnect, AHelloTooLongIsRefusedNamingTheToken) {
  TcpStoreServer server("127.0.0.1", 0);
  StoreJob job;
  job.token = std::string(5000, 'x');
  job.job_id = "torchrun:long";
  job.world_size = 1;
  try {
    connect_tcp_store("127.0.0.1", server.port(), 2s, job, 0);
    FAIL() << "a 5000-byte token was sent";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("store token (5000 bytes"), std::string::npos) << e.what();
  }
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

// A stand-in for the store's server on loopback, for replies the real one never sends: it accepts
// one connection, answers its hello, and hands each later request's index to `serve`, which writes
// whatever reply bytes it likes, when it likes.
class ScriptedServer {
 public:
  using Serve = std::function<void(int fd, int request)>;

  /// `stall`: after the hello, read nothing for this long (a frozen host whose socket buffers
  /// fill up).
  explicit ScriptedServer(Serve serve, std::chrono::milliseconds stall = {})
      : serve_(std::move(serve)), stall_(stall) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("scripted server: cannot listen on loopback");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~ScriptedServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }

  static void reply(int fd, const std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k <= 0) return;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  // A whole reply: status ok, then the payload.
  static Bytes ok(std::string_view payload) {
    store_wire::Writer w;
    w.u8(static_cast<std::uint8_t>(store_wire::Status::ok));
    w.str(payload);
    return std::move(w.bytes());
  }

 private:
  // Reads one request and drops it: the script decides the reply by the request's index alone.
  static bool read_request(int fd) {
    std::uint8_t len[4];
    if (::recv(fd, len, 4, MSG_WAITALL) != 4) return false;
    std::size_t left = static_cast<std::size_t>(len[0]) | static_cast<std::size_t>(len[1]) << 8 |
                       static_cast<std::size_t>(len[2]) << 16 |
                       static_cast<std::size_t>(len[3]) << 24;
    std::uint8_t chunk[4096];
    while (left > 0) {
      const ssize_t k = ::recv(fd, chunk, std::min(left, sizeof chunk), 0);
      if (k <= 0) return false;
      left -= static_cast<std::size_t>(k);
    }
    return true;
  }
  void run() {
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) return;
    for (int request = 0; read_request(fd); ++request) {
      if (request == 0) {
        const Bytes hello = ok("");
        reply(fd, hello.data(), hello.size());
        std::this_thread::sleep_for(stall_);
      } else {
        serve_(fd, request);
      }
    }
    ::close(fd);
  }

  Serve serve_;
  std::chrono::milliseconds stall_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A reply that comes after the client stopped waiting (a stalled store host) is still owed on the
// stream: the next request must read and drop it, not take it as its own.
TEST(TcpStoreReplies, ALateReplyIsNotTakenForTheNextOne) {
  ScriptedServer server([](int fd, int request) {
    if (request == 1) std::this_thread::sleep_for(1500ms);  // past the 1 s reply timeout
    const Bytes r = ScriptedServer::ok(request == 1 ? "value of a" : "value of b");
    ScriptedServer::reply(fd, r.data(), r.size());
  });
  auto s = connect_tcp_store("127.0.0.1", server.port(), 1s);
  EXPECT_THROW(s->get("a", 1s), BackendError);
  std::this_thread::sleep_for(700ms);  // the late reply arrives meanwhile
  EXPECT_EQ(s->get("b", 1s), bytes_of("value of b"));
}

// After a part of a reply, the stream's place is lost: every later request fails, saying why,
// instead of reading the rest of that reply as its own.
TEST(TcpStoreReplies, APartReplyGivesTheConnectionUp) {
  ScriptedServer server([](int fd, int request) {
    const Bytes r = ScriptedServer::ok(request == 1 ? "value of a" : "value of b");
    if (request == 1) {
      ScriptedServer::reply(fd, r.data(), 4);  // 4 of the header's 9 bytes, then a stall
      std::this_thread::sleep_for(1500ms);
      ScriptedServer::reply(fd, r.data() + 4, r.size() - 4);
    } else {
      ScriptedServer::reply(fd, r.data(), r.size());
    }
  });
  auto s = connect_tcp_store("127.0.0.1", server.port(), 1s);
  EXPECT_THROW(s->get("a", 1s), BackendError);
  std::this_thread::sleep_for(700ms);
  try {
    const Bytes b = s->get("b", 1s);
    ADD_FAILURE() << "read " << b.size() << " bytes from a connection whose place was lost";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("given up after an earlier failure"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("no reply from the server within"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(s->responds_within(200ms));
}

// The probe that timeout messages make first ("does the store still answer?") waits at most its
// bound, also while another thread's request holds the connection, waiting out the reply timeout
// for a store that is gone.
TEST(TcpStoreReplies, AProbeWaitsItsBoundWhileAnotherRequestHangs) {
  ScriptedServer server([](int fd, int request) {
    if (request == 1) std::this_thread::sleep_for(1500ms);
    const Bytes r = ScriptedServer::ok("late");
    ScriptedServer::reply(fd, r.data(), r.size());
  });
  auto s = connect_tcp_store("127.0.0.1", server.port(), 1s);
  std::thread other([&] { EXPECT_THROW(s->get("a", 1s), BackendError); });
  std::this_thread::sleep_for(100ms);  // the get holds the connection now
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s->responds_within(200ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  other.join();
  EXPECT_LT(took, 700ms) << "the probe waited for the other request's reply timeout";
}

// A request that a frozen server never takes in (a value larger than the socket buffers) fails
// after the reply timeout, instead of blocking its sender until the server reads again.
TEST(TcpStoreReplies, ARequestTheServerDoesNotTakeFails) {
  ScriptedServer server(
      [](int fd, int) {
        const Bytes r = ScriptedServer::ok("");
        ScriptedServer::reply(fd, r.data(), r.size());
      },
      10s);
  auto s = connect_tcp_store("127.0.0.1", server.port(), 1s);
  const Bytes big(32u << 20, 7);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s->set("big", big);
    ADD_FAILURE() << "a 32 MiB set to a server that reads nothing returned";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("took no more of a request"), std::string::npos)
        << e.what();
  }
  // Each send() may wait the 1 s timeout once more after a part went through (3 s measured):
  // well before the server reads again (10 s).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
}

// Interrupts one thread with SIGUSR2 every `every` while it lives, as a sampling profiler or an
// interval timer does; the handler does nothing. Every interrupted send or recv fails with EINTR,
// SA_RESTART or not, because the sockets carry timeouts (signal(7)).
class SignalStorm {
 public:
  SignalStorm(pthread_t target, std::chrono::milliseconds every) {
    struct sigaction quiet {};
    quiet.sa_handler = [](int) {};
    sigemptyset(&quiet.sa_mask);
    ::sigaction(SIGUSR2, &quiet, &saved_);
    thread_ = std::thread([this, target, every] {
      while (!stop_.load()) {
        std::this_thread::sleep_for(every);
        ::pthread_kill(target, SIGUSR2);
      }
    });
  }
  ~SignalStorm() {
    stop_.store(true);
    thread_.join();
    ::sigaction(SIGUSR2, &saved_, nullptr);
  }
  SignalStorm(const SignalStorm&) = delete;
  SignalStorm& operator=(const SignalStorm&) = delete;

 private:
  struct sigaction saved_ {};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A request to a server that stopped answering gives up after the reply timeout (1 s here) even
// in a process that takes a signal every 20 ms: a signal must not restart the timeout.
TEST(TcpStoreReplies, SignalsDoNotRestartTheReplyTimeout) {
  ScriptedServer server([](int fd, int request) {
    if (request == 1) std::this_thread::sleep_for(5s);  // the server stalls, then answers
    const Bytes r = ScriptedServer::ok("late");
    ScriptedServer::reply(fd, r.data(), r.size());
  });
  auto s = connect_tcp_store("127.0.0.1", server.port(), 1s);
  const auto t0 = std::chrono::steady_clock::now();
  {
    SignalStorm storm(::pthread_self(), 20ms);
    try {
      s->get("a", 1s);
      ADD_FAILURE() << "the get waited for the stalled server's answer";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find("no reply from the server within"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  // A probe under the same signals waits its bound, not more.
  {
    SignalStorm storm(::pthread_self(), 20ms);
    const auto t1 = std::chrono::steady_clock::now();
    EXPECT_FALSE(s->responds_within(300ms));
    EXPECT_LT(std::chrono::steady_clock::now() - t1, 1s);
  }
}

// A reply to add() that is not a count is the server's fault, reported as a BackendError that
// names the store and the key, not as a bare protocol exception.
TEST(TcpStoreReplies, AMalformedCountIsABackendError) {
  ScriptedServer server([](int fd, int) {
    const Bytes r = ScriptedServer::ok("abc");  // 3 bytes where an i64 belongs
    ScriptedServer::reply(fd, r.data(), r.size());
  });
  auto s = connect_tcp_store("127.0.0.1", server.port(), 1s);
  try {
    s->add("counter", 1);
    ADD_FAILURE() << "a 3-byte count was accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("'counter'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mcr::detail
