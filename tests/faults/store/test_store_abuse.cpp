// The rendezvous store against strangers and other jobs, on loopback against a real server:
// garbage, huge length prefixes, no or a wrong token, a second job on the same port, too many
// connections, and a server that goes away under a waiting rank. After each, the legitimate job
// still works.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bootstrap/host.hpp"
#include "bootstrap/store_setup.hpp"
#include "bootstrap/store_socket.hpp"
#include "bootstrap/store_wire.hpp"
#include "bootstrap/tcp_store.hpp"
#include "mcr/comm/memory.hpp"
#include "mcr/errors.hpp"
#include "runtime/runtime.hpp"

namespace mcr::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using store_wire::UniqueFd;

Bytes bytes_of(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

StoreJob job_a() {
  StoreJob j;
  j.token = "secret-of-job-a";
  j.job_id = "job-a";
  j.world_size = 2;
  return j;
}

// This process's resident set, in KiB.
long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

UniqueFd raw_connect(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_GE(fd.get(), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// Sends what it can (the server may close mid-way); returns the bytes sent.
std::size_t send_some(int fd, const void* data, std::size_t n) {
  std::size_t sent = 0;
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (sent < n) {
    const ssize_t k = ::send(fd, p + sent, n - sent, MSG_NOSIGNAL);
    if (k <= 0) break;
    sent += static_cast<std::size_t>(k);
  }
  return sent;
}

// Whether the server closes `fd` within `limit` (reading and discarding any reply first).
bool closed_by_server(int fd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::uint8_t buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

Bytes frame(const Bytes& body) {
  store_wire::Writer w;
  w.u32(static_cast<std::uint32_t>(body.size()));
  for (std::uint8_t b : body)
    w.u8(b);
  return w.bytes();
}

Bytes hello_body(const StoreJob& job, int rank) {
  store_wire::Writer w;
  w.u8(static_cast<std::uint8_t>(store_wire::Command::hello));
  w.u32(store_wire::kProtocolVersion);
  w.str(job.token);
  w.str(job.job_id);
  w.i64(job.world_size);
  w.i64(rank);
  return std::move(w.bytes());
}

// The legitimate job: rank 0 stores a key, rank 1 reads it back.
void expect_job_a_works(const TcpStoreServer& server, const std::string& key) {
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  auto r1 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 1);
  r0->set(key, bytes_of("value"));
  EXPECT_EQ(r1->get(key, 2s), bytes_of("value"));
}

void expect_job_a_works_with(const TcpStoreServer& server, const StoreJob& job,
                             const std::string& key) {
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job, 0);
  auto r1 = connect_tcp_store("127.0.0.1", server.port(), 5s, job, 1);
  r0->set(key, bytes_of("value"));
  EXPECT_EQ(r1->get(key, 2s), bytes_of("value"));
}

// Expects connect_tcp_store to be refused with a BackendError naming the address and `reason`,
// promptly.
void expect_refused(const TcpStoreServer& server, const StoreJob& job, int rank,
                    const std::string& reason) {
  const auto began = Clock::now();
  try {
    connect_tcp_store("127.0.0.1", server.port(), 5s, job, rank);
    ADD_FAILURE() << "a client of another job (" << reason << ") was let in";
  } catch (const BackendError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fmt::format("127.0.0.1:{}", server.port())), std::string::npos) << what;
    EXPECT_NE(what.find(reason), std::string::npos) << what;
  }
  EXPECT_LT(Clock::now() - began, 2s) << "a refusal must not wait for the connect timeout";
}

// A torchrun --standalone run id (uuid4, readable only by the job's own processes) is the store's
// secret: a stranger who guesses the job's name is refused at the hello. A run id a user chose is
// no secret, and the job id never carries the one that is.
TEST(StoreAbuse, TorchrunsRandomRunIdIsTheJobsSecret) {
  struct Env {
    Env() {
      ::unsetenv("MCR_STORE_TOKEN");
      ::setenv("TORCHELASTIC_RUN_ID", "3f6c2f4e-8b1d-4c9a-9e2f-5a7b0c1d2e3f", 1);
    }
    ~Env() { ::unsetenv("TORCHELASTIC_RUN_ID"); }
  } env;
  LaunchInfo l;
  l.launcher = Launcher::torchrun;
  l.size = 2;
  const StoreJob job = torchrun_store_job(l);
  EXPECT_EQ(job.token, "torchelastic-run:3f6c2f4e-8b1d-4c9a-9e2f-5a7b0c1d2e3f");
  EXPECT_EQ(job.job_id, "torchrun");
  EXPECT_EQ(job.job_id.find("3f6c2f4e"), std::string::npos) << "the job id carries the secret";

  TcpStoreServer server("127.0.0.1", 0, job);
  StoreJob stranger;
  stranger.job_id = "torchrun:default";  // what a run without a secret is called
  stranger.world_size = 2;
  expect_refused(server, stranger, 1, "wrong token");
  stranger.job_id = "torchrun";
  expect_refused(server, stranger, 1, "wrong token");
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job, 0);
  auto r1 = connect_tcp_store("127.0.0.1", server.port(), 5s, job, 1);
  r0->set("k", bytes_of("v"));
  EXPECT_EQ(r1->get("k", 2s), bytes_of("v"));

  ::setenv("TORCHELASTIC_RUN_ID", "job42", 1);  // chosen by hand (--rdzv-id): not a secret
  const StoreJob chosen = torchrun_store_job(l);
  EXPECT_EQ(chosen.token, "");
  EXPECT_EQ(chosen.job_id, "torchrun:job42");
  ::setenv("MCR_STORE_TOKEN", "given", 1);
  EXPECT_EQ(torchrun_store_job(l).token, "given");
  ::unsetenv("MCR_STORE_TOKEN");
}

// Where anyone may join (no secret), a connection that sends most of a large request and then
// drops makes the server buffer it; once the connection is gone, that memory goes back to the
// system even under the memory policy that keeps freed blocks for reuse (mcr/comm/memory.hpp).
TEST(StoreAbuse, MemoryADroppedConnectionMadeTheServerHoldIsReturned) {
  mcr::apply_memory_policy();
  StoreJob open = job_a();
  open.token.clear();
  TcpStoreServer server("127.0.0.1", 0, open);
  const Bytes junk(48 << 20, 0x5a);  // before the baseline: this test's own buffer
  const long rss_before = rss_kib();
  {
    UniqueFd fd = raw_connect(server.port());
    const Bytes hello = frame(hello_body(open, 1));
    send_some(fd.get(), hello.data(), hello.size());
    store_wire::Writer w;
    w.u32(60 << 20);  // announces a 60 MiB set, sends 48 MiB of it, and goes
    send_some(fd.get(), w.bytes().data(), w.bytes().size());
    send_some(fd.get(), junk.data(), junk.size());
  }
  long grew = 0;
  for (int i = 0; i < 60; ++i) {  // the server notices the close within a poll cycle
    std::this_thread::sleep_for(50ms);
    grew = rss_kib() - rss_before;
    if (grew < 16 * 1024) break;
  }
  EXPECT_LT(grew, 16 * 1024) << "the server kept " << grew / 1024
                             << " MiB that a dropped connection made it buffer";
  expect_job_a_works_with(server, open, "after-drop");
}

TEST(StoreAbuse, GarbageClosesOnlyThatConnection) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  for (std::string_view garbage :
       {std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string_view("\0\0\0\0", 4),
        std::string_view("\x10\0\0\0\x01\xff\xff\xff\xff\xff\xff\xff\xff garbage", 24)}) {
    UniqueFd fd = raw_connect(server.port());
    send_some(fd.get(), garbage.data(), garbage.size());
    EXPECT_TRUE(closed_by_server(fd.get(), 2s)) << "garbage '" << garbage << "' was not refused";
  }
  EXPECT_EQ(server.stats().rejected_hello, 3u);
  expect_job_a_works(server, "after-garbage");
}

TEST(StoreAbuse, HugeLengthPrefixesAllocateNothing) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  const long rss_before = rss_kib();
  // Before the hello: three connections announce 64 MiB, 1 GiB and 4 GiB and start sending.
  const Bytes junk(8 << 20, 0x5a);
  for (std::uint8_t top : {0x03, 0x3f, 0xff}) {
    UniqueFd fd = raw_connect(server.port());
    const std::uint8_t prefix[4] = {0xff, 0xff, 0xff, top};
    send_some(fd.get(), prefix, sizeof prefix);
    send_some(fd.get(), junk.data(), junk.size());
    EXPECT_TRUE(closed_by_server(fd.get(), 2s));
  }
  // After a valid hello, a prefix just past the request cap is refused as well.
  {
    UniqueFd fd = raw_connect(server.port());
    const Bytes hello = frame(hello_body(job_a(), 1));
    send_some(fd.get(), hello.data(), hello.size());
    store_wire::Writer w;
    w.u32(store_wire::kMaxBodyBytes + 1);
    send_some(fd.get(), w.bytes().data(), w.bytes().size());
    send_some(fd.get(), junk.data(), junk.size());
    EXPECT_TRUE(closed_by_server(fd.get(), 2s));
    EXPECT_EQ(server.stats().protocol_errors, 1u);
  }
  const auto stats = server.stats();
  EXPECT_LT(stats.peak_buffered_bytes, 1u << 20) << "the server buffered a stranger's bytes";
  EXPECT_EQ(stats.stored_bytes, 0u);
  EXPECT_LT(rss_kib() - rss_before, 16 * 1024) << "resident set grew by more than 16 MiB";
  expect_job_a_works(server, "after-huge-prefix");
}

TEST(StoreAbuse, WrongOrMissingTokenIsRefusedAndTheServerKeepsServing) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  StoreJob wrong = job_a();
  wrong.token = "guessed";
  expect_refused(server, wrong, 1, "token");
  StoreJob none = job_a();
  none.token.clear();
  expect_refused(server, none, 1, "token");
  EXPECT_EQ(server.stats().rejected_hello, 2u);
  expect_job_a_works(server, "after-wrong-token");
}

TEST(StoreAbuse, AStrangerCannotPresetAJobsKeys) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  // A set without a hello: what a stranger would send to spoil the next new_group.
  store_wire::Writer w;
  w.u8(static_cast<std::uint8_t>(store_wire::Command::set));
  w.str("job-a/mcr/split/0/0/1");
  w.blob("spoilt", 6);
  UniqueFd fd = raw_connect(server.port());
  const Bytes set = frame(w.bytes());
  send_some(fd.get(), set.data(), set.size());
  EXPECT_TRUE(closed_by_server(fd.get(), 2s));
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  EXPECT_FALSE(r0->check({"mcr/split/0/0/1"}));
  EXPECT_EQ(server.stats().stored_bytes, 0u);
}

TEST(StoreAbuse, ASecondJobOnTheSamePortFailsWithoutHurtingTheFirst) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  auto r1 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 1);
  r0->set("mcr/split/0/0/0", bytes_of("job a's"));

  StoreJob other_token = job_a();
  other_token.token = "secret-of-job-b";
  expect_refused(server, other_token, 0, "token");
  StoreJob other_id = job_a();
  other_id.job_id = "job-b";
  expect_refused(server, other_id, 0, "job id");
  StoreJob other_size = job_a();
  other_size.world_size = 3;
  expect_refused(server, other_size, 2, "world size");
  expect_refused(server, job_a(), 1, "rank 1 is already connected");
  expect_refused(server, job_a(), 2, "outside this job's world");

  EXPECT_EQ(r1->get("mcr/split/0/0/0", 1s), bytes_of("job a's"));
  r1->set("mcr/split/0/0/1", bytes_of("still job a"));
  EXPECT_EQ(r0->get("mcr/split/0/0/1", 1s), bytes_of("still job a"));
}

TEST(StoreAbuse, JobsWithoutATokenAreStillKeptApartByIdAndSize) {
  StoreJob open;
  open.job_id = "torchrun:default";
  open.world_size = 2;
  TcpStoreServer server("127.0.0.1", 0, open);
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, open, 0);
  StoreJob bigger = open;
  bigger.world_size = 4;
  expect_refused(server, bigger, 3, "world size");
  expect_refused(server, open, 0, "rank 0 is already connected");
}

TEST(StoreAbuse, OversizedKeysAndValuesAreRefusedBeforeSending) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  EXPECT_THROW(r0->set(std::string(store_wire::kMaxKeyBytes, 'k'), bytes_of("v")), InvalidArgument);
  try {
    r0->set("big", Bytes(store_wire::kMaxValueBytes + 1));
    ADD_FAILURE() << "a value over the cap was sent";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the store's limit"), std::string::npos);
  }
  EXPECT_EQ(server.stats().stored_bytes, 0u);
  r0->set("small", bytes_of("fine"));
  EXPECT_EQ(r0->get("small", 1s), bytes_of("fine"));
}

TEST(StoreAbuse, TooManyConnectionsWithoutAHelloAreClosedOnAccept) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  std::vector<UniqueFd> idle;
  for (std::size_t i = 0; i < store_wire::kMaxPendingConnections + 8; ++i)
    idle.push_back(raw_connect(server.port()));
  const auto deadline = Clock::now() + 2s;
  while (server.stats().refused < 8 && Clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.stats().refused, 8u);
  idle.clear();  // once they are gone, the job gets in
  expect_job_a_works(server, "after-flood");
}

TEST(StoreAbuse, ARankWaitingWhenTheServerGoesAwayIsToldWhy) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, job_a());
  auto r1 = connect_tcp_store("127.0.0.1", server->port(), 5s, job_a(), 1);
  std::string error;
  std::thread waiter([&] {
    try {
      r1->get("never-set", 30s);
    } catch (const BackendError& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);
  const auto began = Clock::now();
  std::thread closer([&] { server.reset(); });
  waiter.join();
  EXPECT_LT(Clock::now() - began, 3s);
  EXPECT_NE(error.find("going away"), std::string::npos) << error;
  r1.reset();
  closer.join();
}

// The goodbye reaches the server thread asynchronously: a wait is refused once it has. Returns that
// refusal's message (empty if none came within 2 s).
std::string refusal_of_a_wait(Store& rank) {
  const auto deadline = Clock::now() + 2s;
  while (Clock::now() < deadline) {
    try {
      rank.get("never-set", 50ms);
    } catch (const BackendError& e) {
      return e.what();
    } catch (const TimeoutError&) {
    }
  }
  return {};
}

TEST(StoreAbuse, WhileTheOwnerGoesAwayImmediateRequestsAreStillServed) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, job_a());
  auto r1 = connect_tcp_store("127.0.0.1", server->port(), 5s, job_a(), 1);
  r1->set("progress", {7});
  std::thread closer([&] { server.reset(); });  // says goodbye, then waits up to 2 s for r1
  const std::string error = refusal_of_a_wait(*r1);
  EXPECT_NE(error.find("going away"), std::string::npos) << error;
  // What can be answered at once still is: a rank writing its error reads its peers' progress.
  EXPECT_TRUE(r1->responds_within(1000ms));
  r1->set("mine", {1});
  EXPECT_EQ(r1->get("progress", 100ms), (Bytes{7}));
  EXPECT_TRUE(r1->check({"mine", "progress"}));
  r1.reset();
  closer.join();
}

// While the owner goes away (a rank still connected holds it in its goodbye grace), a rank that
// connects belongs to the job's next runtime (destroy_process_group, then init_process_group with
// the same job id): it must not be let in to read the old runtime's keys. Its connect is refused
// until a new store listens, and a connection accepted before the goodbye is closed unanswered at
// its hello, which the client retries.
TEST(StoreAbuse, WhileTheOwnerGoesAwayNoNewRankGetsIn) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0, job_a());
  const int port = server->port();
  auto r1 = connect_tcp_store("127.0.0.1", port, 5s, job_a(), 1);
  r1->set("old-runtime", {7});
  UniqueFd early = raw_connect(port);  // accepted before the goodbye, its hello sent after it
  // Accepted by the server, not only queued in the listen backlog (which the goodbye resets).
  for (const auto until = Clock::now() + 2s; server->stats().accepted < 2 && Clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(server->stats().accepted, 2u);
  std::thread closer([&] { server.reset(); });  // says goodbye, then waits up to 2 s for r1
  const std::string error = refusal_of_a_wait(*r1);
  ASSERT_NE(error.find("going away"), std::string::npos) << error;
  const Bytes hello = frame(hello_body(job_a(), 0));
  EXPECT_EQ(send_some(early.get(), hello.data(), hello.size()), hello.size());
  EXPECT_TRUE(closed_by_server(early.get(), 1000ms)) << "a hello after the goodbye was answered";
  try {
    auto next = connect_tcp_store("127.0.0.1", port, 300ms, job_a(), 0);
    ADD_FAILURE() << "a rank connecting while the owner goes away was let in; it reads "
                  << next->get("old-runtime", 100ms).size() << " bytes of the old runtime's key";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("127.0.0.1:{}", port)), std::string::npos)
        << e.what();
  }
  r1.reset();
  closer.join();
}

// Finalize on rank 0 waits for the other ranks to leave its store; a rank that has left and calls
// init() again meanwhile must not be let in: it would read this runtime's keys, and rank 0 would
// wait for it to leave until its timeout. Before, its hello was answered as rank 1's.
TEST(StoreAbuse, ARankReturningWhileTheOthersLeaveIsNotLetIn) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  auto r1 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 1);
  r1->set("old-runtime", bytes_of("stale"));
  EXPECT_FALSE(server.wait_for_ranks_to_leave(0, 50ms));  // the owner starts waiting
  r1.reset();
  try {
    auto again = connect_tcp_store("127.0.0.1", server.port(), 300ms, job_a(), 1);
    ADD_FAILURE() << "a returning rank was let in; it reads "
                  << again->get("old-runtime", 100ms).size() << " bytes of the old runtime's key";
  } catch (const TimeoutError&) {
  }
  EXPECT_TRUE(server.wait_for_ranks_to_leave(0, 2s));
}

// A name resolving to an address this host cannot use (localhost's ::1 with IPv6 turned off:
// socket() refuses the family) and one it can: the connect goes on to the usable one (it ended at
// the first at once, where 127.0.0.1 had only refused because the server was not yet listening).
// Only a list of unusable addresses is an error, at once.
TEST(StoreAbuse, AnUnusableAddressIsPassedOver) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(static_cast<std::uint16_t>(server.port()));
  ::inet_pton(AF_INET, "127.0.0.1", &v4.sin_addr);
  addrinfo usable{};
  usable.ai_family = AF_INET;
  usable.ai_socktype = SOCK_STREAM;
  usable.ai_addr = reinterpret_cast<sockaddr*>(&v4);
  usable.ai_addrlen = sizeof v4;
  addrinfo unusable = usable;
  unusable.ai_family = 12345;  // no such address family: socket() fails with EAFNOSUPPORT
  unusable.ai_next = &usable;
  auto store = connect_tcp_store_to(&unusable, "test-list", 5s, job_a(), 0);
  store->set("k", bytes_of("v"));
  EXPECT_EQ(store->get("k", 1s), bytes_of("v"));
  unusable.ai_next = nullptr;
  const auto began = Clock::now();
  try {
    connect_tcp_store_to(&unusable, "test-list", 5s, job_a(), 1);
    ADD_FAILURE() << "a list of unusable addresses connected";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("socket(family 12345)"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - began, 2s) << "an address no retry helps must fail at once";
}

// Reads one reply (<status><u64 length><payload>) within `limit`; its status, or -1.
int read_reply_status(int fd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  Bytes got;
  std::uint8_t buf[256];
  while (Clock::now() < deadline) {
    if (got.size() >= 9) {
      store_wire::Reader header(got.data() + 1, 8);
      const std::uint64_t n = header.u64();
      if (got.size() >= 9 + n) return got[0];
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    // One byte at a time: the next reply must stay unread for the next call.
    const ssize_t k = ::recv(fd, buf, 1, 0);
    if (k <= 0) return -1;
    got.push_back(buf[0]);
  }
  return -1;
}

// A client reads replies in the order of its requests. A request sent while a get of the same
// connection is parked (a caller's wait for the get gave up: the client then discards one late
// reply) is answered after the get: it was answered first, and the client took the set's "ok" for
// the late get's reply and the get's "timed out" for the set's.
TEST(StoreAbuse, RepliesFollowTheOrderOfRequests) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  UniqueFd fd = raw_connect(server.port());
  store_wire::Writer get;
  get.u8(static_cast<std::uint8_t>(store_wire::Command::get));
  get.str("job-a/never-set");
  get.u64(300);  // ms
  store_wire::Writer set;
  set.u8(static_cast<std::uint8_t>(store_wire::Command::set));
  set.str("job-a/x");
  set.blob("v", 1);
  Bytes all = frame(hello_body(job_a(), 1));
  for (const Bytes& b : {frame(get.bytes()), frame(set.bytes())})
    all.insert(all.end(), b.begin(), b.end());
  ASSERT_EQ(send_some(fd.get(), all.data(), all.size()), all.size());
  using store_wire::Status;
  EXPECT_EQ(read_reply_status(fd.get(), 2s), static_cast<int>(Status::ok));         // hello
  EXPECT_EQ(read_reply_status(fd.get(), 2s), static_cast<int>(Status::timed_out));  // get
  EXPECT_EQ(read_reply_status(fd.get(), 2s), static_cast<int>(Status::ok));         // set
  // The set was taken once the get was answered.
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  EXPECT_EQ(r0->get("x", 2s), bytes_of("v"));
}

TEST(StoreAbuse, TheOwnerWaitsForRanksToLeave) {
  TcpStoreServer server("127.0.0.1", 0, job_a());
  auto r0 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 0);
  auto r1 = connect_tcp_store("127.0.0.1", server.port(), 5s, job_a(), 1);
  EXPECT_FALSE(server.wait_for_ranks_to_leave(0, 100ms));
  std::thread leaver([&] {
    std::this_thread::sleep_for(100ms);
    r1.reset();
  });
  EXPECT_TRUE(server.wait_for_ranks_to_leave(0, 5s));
  leaver.join();
}

// An MPI launcher's world of two with no MPI exchange (a build without MPI under mpirun): rank 1
// was told "port 0 is outside [1, 65535]" and rank 0 served a loopback store, waiting out its
// timeout. Both raise at once, naming the build and what to do instead.
TEST(StoreSetup, AnMpiJobWithoutMpiIsRefusedOnEveryRank) {
  for (int rank : {0, 1}) {
    Runtime rt;
    rt.launch.launcher = Launcher::mpi;
    rt.launch.mpi_world = true;
    rt.launch.rank = rank;
    rt.launch.size = 2;
    const auto t0 = Clock::now();
    try {
      start_store(rt, nullptr, 5s);
      ADD_FAILURE() << "rank " << rank << " formed a world of 2 without MPI";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("no MPI to form the world through"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(Clock::now() - t0, 2s) << "rank " << rank;
    EXPECT_EQ(rt.store_server, nullptr);
  }
}

TEST(HostIdentity, NamesHostBootAndNetworkNamespace) {
  const std::string id = host_identity();
  EXPECT_EQ(id, host_identity());
  EXPECT_NE(id.find("net:["), std::string::npos) << id;
  EXPECT_EQ(std::count(id.begin(), id.end(), '/'), 2) << id;
  const auto lo = interface_addresses("lo");
  EXPECT_NE(std::find(lo.begin(), lo.end(), "127.0.0.1"), lo.end());
  EXPECT_TRUE(interface_addresses("no-such-interface0").empty());
  EXPECT_TRUE(is_local_address("127.0.0.1"));
  EXPECT_TRUE(is_local_address("127.0.1.1"));   // what Debian maps the host name to
  EXPECT_FALSE(is_local_address("192.0.2.1"));  // TEST-NET-1, never assigned
}

TEST(HostIdentity, AnotherNetworkNamespaceIsAnotherHost) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    const std::string id = ::unshare(CLONE_NEWNET) == 0 ? host_identity() : "unshare failed";
    [[maybe_unused]] auto n = ::write(pipe_fds[1], id.data(), id.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string child;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;)
    child.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (child == "unshare failed") GTEST_SKIP() << "no permission to create a network namespace";
  EXPECT_NE(child, host_identity()) << "same host name and boot, other network namespace";
}

}  // namespace
}  // namespace mcr::detail
