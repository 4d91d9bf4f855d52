// The TCP store's server: one thread, poll() over a listening socket, its clients and a wake pipe;
// waiting gets are parked and served when their key is set or their deadline passes. Nothing but a
// hello with the job's token is accepted from a new connection, and every length is checked
// against the caps of store_wire.hpp before a byte is buffered, so a stranger on the port can
// neither use the store nor make this process allocate more than a few KiB per connection.
#include "bootstrap/tcp_store.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <source_location>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bootstrap/store_socket.hpp"
#include "bootstrap/store_wire.hpp"
#include "core/log.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {

using namespace store_wire;  // NOLINT(google-build-using-namespace): this file speaks the wire
                             // format

namespace {

// Compares without an early exit, so the time a refusal takes says nothing about the token.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    diff |=
        static_cast<unsigned>(static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  return diff == 0;
}

std::string peer_text(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv,
                    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return addr.ss_family == AF_INET6 ? fmt::format("[{}]:{}", host, serv)
                                    : fmt::format("{}:{}", host, serv);
}

}  // namespace

struct TcpStoreServer::Impl {
  struct Client {
    UniqueFd fd;
    std::string peer;
    Bytes in;
    Bytes out;
    std::size_t out_sent = 0;
    bool closed = false;
    bool close_after_flush = false;  // refused: the reason is on its way, then the connection ends
    bool hello_done = false;
    // A get of this connection is parked: its later requests wait (in `in`, or unread) until it
    // is answered, as a client reads replies in the order of its requests. One answered first
    // was taken by the client for the late reply it discards, and the get's for its own.
    bool waiting = false;
    int rank = -1;
    Clock::time_point accepted_at;
    std::size_t pending_out() const { return out.size() - out_sent; }
  };
  struct Waiter {
    std::uint64_t client;
    std::string key;
    Clock::time_point deadline;
  };

  StoreJob job;
  UniqueFd listen_fd;
  UniqueFd wake_read;
  UniqueFd wake_write;
  int port = 0;
  std::thread thread;

  std::atomic<std::uint64_t> accepted{0}, refused{0}, rejected_hello{0}, protocol_errors{0},
      buffered_bytes{0}, peak_buffered_bytes{0}, stored_bytes_now{0};
  std::atomic<int> except_rank{-1};
  std::atomic<int> other_ranks{0};  // connected ranks other than except_rank
  std::atomic<long long> goodbye_grace_ms{2000};
  bool closing = false;  // server thread: the owner is going away; waits are refused
  // Set by the owner's first wait_for_ranks_to_leave: the runtime is ending, so a rank that says
  // hello now belongs to the next one (a re-init after finalize) and is not let in.
  std::atomic<bool> ranks_leaving{false};
  // Buffer bytes that refused, dropped or half-sent connections made the server hold: returned to
  // the system once they are freed (release_abandoned_buffers), not kept by the process's memory
  // policy for reuse, so that a stranger cannot grow the job's rank 0 for good.
  std::size_t abandoned_bytes = 0;

  // Everything below is touched only by the server thread.
  std::map<std::string, Bytes> data;
  std::size_t stored_bytes = 0;
  std::unordered_map<std::uint64_t, Client> clients;
  std::unordered_map<int, std::uint64_t> rank_client;  // rank -> its live connection
  std::vector<Waiter> waiters;
  std::vector<std::uint64_t> resumed;  // connections whose parked get was just answered
  std::uint64_t next_client = 1;

  std::size_t max_connections() const {
    return job.world_size > 0 ? static_cast<std::size_t>(job.world_size) + kMaxPendingConnections
                              : 1024;
  }
  void run() noexcept;
  void accept_clients();
  // After a failure of the server's own (poll, its wake-up pipe): closes everything and says why.
  void stop_serving(const char* call, int err, int line);
  void read_from(std::uint64_t id, Client& c);
  bool take_frames(std::uint64_t id, Client& c);
  void handle(std::uint64_t id, Client& c, const std::uint8_t* body, std::size_t n);
  void hello(std::uint64_t id, Client& c, Reader& r);
  void refuse(Client& c, const std::string& why);
  void release_abandoned_buffers();
  void drop(Client& c, std::string_view why);
  void reply(Client& c, Bytes bytes);
  void flush(Client& c);
  void store(const std::string& key, Bytes value);
  void serve_waiters(const std::string& key);
  void expire_waiters();
  // Takes the requests the connections answered by serve_waiters or expire_waiters held back.
  void resume_answered();
  void expire_hellos();
  void account();
  void say_goodbye();
  int poll_timeout_ms() const;
};

// What ranks still connected are told while the owner's runtime is torn down outside finalize.
constexpr std::string_view kGoodbye =
    "the store's owner (rank 0) is going away: its runtime was torn down (init failed there, or it "
    "left without finalize); see rank 0's error";

TcpStoreServer::TcpStoreServer(const std::string& bind_host, int port, StoreJob job)
    : impl_(new Impl) {
  if (port < 0 || port > 65535) {
    throw InvalidArgument(fmt::format("TcpStoreServer: port {} is outside [0, 65535]", port));
  }
  impl_->job = std::move(job);
  const bool any = bind_host.empty() || bind_host == "0.0.0.0";
  addrinfo hints{};
  hints.ai_family = any ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  AddrInfoList list;
  const std::string port_text = std::to_string(port);
  int rc = ::getaddrinfo(any ? nullptr : bind_host.c_str(), port_text.c_str(), &hints, &list.head);
  if (rc != 0) {
    throw BackendError(fmt::format("TCP store: getaddrinfo('{}', {}) failed at {}:{}: {}",
                                   bind_host, port, file_name(std::source_location::current()),
                                   __LINE__, ::gai_strerror(rc)));
  }
  int last_err = 0;
  std::string last_call;
  for (addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.get() < 0) {
      last_err = errno, last_call = "socket";
      continue;
    }
    int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      throw_socket_error("setsockopt(SO_REUSEADDR)", errno);
    }
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_err = errno, last_call = fmt::format("bind({}:{})", bind_host, port);
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      last_err = errno, last_call = "listen";
      continue;
    }
    impl_->listen_fd = std::move(fd);
    break;
  }
  if (impl_->listen_fd.get() < 0 && last_err == EADDRINUSE) {
    // The usual cause is not mcr's: say what to do about it.
    throw BackendError(fmt::format(
        "TCP store: {} failed: port {} is in use by another program (or by a previous run that "
        "has not let it go yet): choose a free MASTER_PORT, or let the launcher pick one "
        "(torchrun --standalone)",
        last_call, port));
  }
  if (impl_->listen_fd.get() < 0) throw_socket_error(last_call, last_err);
  set_nonblocking(impl_->listen_fd.get());

  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(impl_->listen_fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw_socket_error("getsockname", errno);
  }
  impl_->port = addr.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) throw_socket_error("pipe2", errno);
  impl_->wake_read = UniqueFd(pipe_fds[0]);
  impl_->wake_write = UniqueFd(pipe_fds[1]);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

TcpStoreServer::~TcpStoreServer() {
  // A failed wake-up write can only mean the pipe is full, which already wakes the thread.
  if (impl_->other_ranks.load() > 0 && impl_->goodbye_grace_ms.load() > 0) {
    const char goodbye = 'g';
    [[maybe_unused]] auto written = ::write(impl_->wake_write.get(), &goodbye, 1);
    wait_for_ranks_to_leave(impl_->except_rank.load(),
                            std::chrono::milliseconds(impl_->goodbye_grace_ms.load()));
  }
  const char stop = 's';
  [[maybe_unused]] auto written = ::write(impl_->wake_write.get(), &stop, 1);
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool TcpStoreServer::wait_for_ranks_to_leave(int except_rank, std::chrono::milliseconds limit) {
  impl_->ranks_leaving.store(true);
  impl_->except_rank.store(except_rank);
  const char recount = 'r';
  [[maybe_unused]] auto written = ::write(impl_->wake_write.get(), &recount, 1);
  const auto deadline = Clock::now() + limit;
  // The server thread recounts after every event; a short poll keeps this simple and cheap.
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (impl_->other_ranks.load() == 0) return true;
    if (Clock::now() >= deadline) return false;
  }
}

void TcpStoreServer::set_goodbye_grace(std::chrono::milliseconds grace) noexcept {
  impl_->goodbye_grace_ms.store(grace.count());
}

int TcpStoreServer::port() const noexcept {
  return impl_->port;
}

TcpStoreServer::Stats TcpStoreServer::stats() const noexcept {
  Stats s;
  s.accepted = impl_->accepted.load();
  s.refused = impl_->refused.load();
  s.rejected_hello = impl_->rejected_hello.load();
  s.protocol_errors = impl_->protocol_errors.load();
  s.buffered_bytes = impl_->buffered_bytes.load();
  s.peak_buffered_bytes = impl_->peak_buffered_bytes.load();
  s.stored_bytes = impl_->stored_bytes_now.load();
  return s;
}

int TcpStoreServer::Impl::poll_timeout_ms() const {
  std::optional<Clock::time_point> earliest;
  for (const auto& w : waiters)
    if (!earliest || w.deadline < *earliest) earliest = w.deadline;
  for (const auto& [id, c] : clients) {
    if (c.hello_done) continue;
    const auto d = c.accepted_at + kHelloDeadline;
    if (!earliest || d < *earliest) earliest = d;
  }
  if (!earliest) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*earliest - Clock::now()).count();
  // poll() takes an int; a later deadline is simply re-armed after this wake-up.
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

void TcpStoreServer::Impl::run() noexcept {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  for (;;) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    fds.push_back({listen_fd.get(), POLLIN, 0});
    for (auto& [id, c] : clients) {
      // A client with a large backlog of unread replies is not read from until it catches up.
      short events = c.pending_out() > kMaxValueBytes || c.close_after_flush ? 0 : POLLIN;
      if (c.pending_out() > 0) events |= POLLOUT;
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (rc < 0) {
      if (errno == EINTR) continue;
      stop_serving("poll", errno, __LINE__);
      return;
    }
    if (fds[0].revents != 0) {  // the owner: 's' stop, 'g' say goodbye, 'r' recount
      char cmds[64];
      const ssize_t n = ::read(wake_read.get(), cmds, sizeof cmds);
      // Interrupted, or nothing there after all: the owner's byte is read on the next round.
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) {
        stop_serving("read of the wake-up pipe", errno, __LINE__);
        return;
      }
      const std::string_view got(cmds, static_cast<std::size_t>(n));
      if (n == 0 || got.find('s') != std::string_view::npos) return;
      if (got.find('g') != std::string_view::npos && !closing) say_goodbye();
    }
    if (fds[1].revents & POLLIN) accept_clients();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto it = clients.find(ids[i]);
      if (it == clients.end()) continue;
      Client& c = it->second;
      const short rev = fds[i + 2].revents;
      if ((rev & POLLOUT) && !c.closed) flush(c);
      if ((rev & (POLLIN | POLLHUP | POLLERR)) && !c.closed) read_from(ids[i], c);
    }
    expire_waiters();
    expire_hellos();
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->second.closed) {
        const auto id = it->first;
        // A request cut off in the middle (or a connection never past its hello) leaves what it
        // sent unused.
        if (!it->second.in.empty() || !it->second.hello_done) {
          abandoned_bytes += it->second.in.capacity() + it->second.out.capacity();
        }
        std::erase_if(waiters, [id](const Waiter& w) { return w.client == id; });
        if (auto r = rank_client.find(it->second.rank); r != rank_client.end() && r->second == id) {
          rank_client.erase(r);
        }
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
    release_abandoned_buffers();
    account();
  }
}

void TcpStoreServer::Impl::stop_serving(const char* call, int err, int line) {
  // Nothing can be served without poll or the owner's pipe. The connections are closed, so that
  // every rank's request fails at once (the store closed its connection) instead of waiting out
  // its timeout for a reply that never comes; the counts the owner reads say none is left.
  std::fprintf(stderr,
               "mcr: TCP store server: %s failed at tcp_store_server.cpp:%d: %s; the server stops "
               "and closes every connection\n",
               call, line, errno_text(err).c_str());
  closing = true;
  listen_fd = UniqueFd();
  waiters.clear();
  rank_client.clear();
  clients.clear();
  account();
}

void TcpStoreServer::Impl::release_abandoned_buffers() {
  constexpr std::size_t kWorthReturning = std::size_t{1} << 20;
  if (abandoned_bytes < kWorthReturning) return;
  log_debug("TCP store server: returning {} bytes that dropped connections left to the system",
            abandoned_bytes);
  abandoned_bytes = 0;
  ::malloc_trim(0);  // also for freed blocks the memory policy keeps (M_TRIM_THRESHOLD -1)
}

void TcpStoreServer::Impl::say_goodbye() {
  closing = true;
  // A rank that connects now belongs to the job's next runtime (a re-init after finalize, with the
  // same job id): it must not meet this store's keys. Without a listener its connect is refused,
  // and it retries until the next owner's store listens on the port. (poll ignores the -1.)
  listen_fd = UniqueFd();
  for (const auto& w : waiters) {
    auto c = clients.find(w.client);
    if (c != clients.end() && !c->second.closed) {
      reply(c->second, encode_reply(Status::error, kGoodbye));
      resumed.push_back(w.client);
    }
  }
  waiters.clear();
  resume_answered();
}

void TcpStoreServer::Impl::account() {
  std::uint64_t total = 0;
  int others = 0;
  const int except = except_rank.load();
  for (const auto& [id, c] : clients) {
    total += c.in.size() + c.pending_out();
    if (c.hello_done && !c.closed && c.rank >= 0 && c.rank != except) ++others;
  }
  other_ranks.store(others);
  buffered_bytes.store(total);
  if (total > peak_buffered_bytes.load()) peak_buffered_bytes.store(total);
  stored_bytes_now.store(stored_bytes);
}

void TcpStoreServer::Impl::accept_clients() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
        return;
      }
      // Out of descriptors, typically: the connection stays queued, so back off rather than
      // spin on a listening socket that keeps polling readable.
      log_debug("TCP store server: accept failed: {}", errno_text(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    Client c;
    c.fd = UniqueFd(fd);
    c.peer = peer_text(addr, len);
    c.accepted_at = Clock::now();
    const auto pending = static_cast<std::size_t>(std::count_if(
        clients.begin(), clients.end(), [](auto& kv) { return !kv.second.hello_done; }));
    if (clients.size() >= max_connections() || pending >= kMaxPendingConnections) {
      // Closed at once rather than left in the backlog; a real rank retries until its timeout.
      ++refused;
      log_debug(
          "TCP store server: refused a connection from {}: {} connections, {} without a hello",
          c.peer, clients.size(), pending);
      continue;
    }
    ++accepted;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // latency only: best effort
    clients.emplace(next_client++, std::move(c));
  }
}

void TcpStoreServer::Impl::drop(Client& c, std::string_view why) {
  if (c.hello_done) {
    ++protocol_errors;
  } else {
    ++rejected_hello;
  }
  log_debug("TCP store server: closed the connection from {} (rank {}): {}", c.peer, c.rank, why);
  c.closed = true;
  abandoned_bytes += c.in.capacity();
  c.in.clear();
  c.in.shrink_to_fit();
}

void TcpStoreServer::Impl::refuse(Client& c, const std::string& why) {
  ++rejected_hello;
  log_debug("TCP store server: refused the connection from {}: {}", c.peer, why);
  c.close_after_flush = true;
  abandoned_bytes += c.in.capacity();
  c.in.clear();
  c.in.shrink_to_fit();
  reply(c, encode_reply(Status::error, why));
}

void TcpStoreServer::Impl::read_from(std::uint64_t id, Client& c) {
  std::uint8_t chunk[64 * 1024];
  while (!c.closed && !c.close_after_flush && c.pending_out() <= kMaxValueBytes) {
    ssize_t n = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      c.in.insert(c.in.end(), chunk, chunk + n);
      // Read on while a get waits (so that a closed connection is seen), but a client sends one
      // request after a get at most, that of a caller whose wait for the get's reply gave up.
      if (c.waiting && c.in.size() > 2 * (4 + std::size_t{kMaxBodyBytes})) {
        drop(c, "requests keep coming while a get waits: not the store's client");
        return;
      }
      account();
      if (!take_frames(id, c)) return;
      continue;
    }
    if (n == 0) {
      c.closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      // A reset is a rank gone (its own error says why); anything else is the server's to say.
      log_debug("TCP store server: recv from {} (rank {}) failed: {}; connection closed", c.peer,
                c.rank, errno_text(errno));
      c.closed = true;
    }
    break;
  }
}

// Handles every complete frame in c.in, up to a get that is parked (the rest waits for its
// answer). The length prefix is checked against the cap of the connection's state before its body
// is waited for, so c.in holds at most one capped frame and a read chunk, or, behind a parked get,
// at most twice that (read_from drops the connection past it). Returns false once the connection is
// closed or being refused.
bool TcpStoreServer::Impl::take_frames(std::uint64_t id, Client& c) {
  std::size_t pos = 0;
  while (!c.closed && !c.close_after_flush && !c.waiting && c.in.size() - pos >= 4) {
    Reader header(c.in.data() + pos, 4);
    const std::uint32_t body_len = header.u32();
    const std::uint32_t cap = c.hello_done ? kMaxBodyBytes : kMaxHelloBytes;
    if (body_len == 0 || body_len > cap) {
      drop(c, fmt::format("request length {} is outside [1, {}]: not the store protocol", body_len,
                          cap));
      return false;
    }
    if (c.in.size() - pos - 4 < body_len) break;
    handle(id, c, c.in.data() + pos + 4, body_len);
    pos += 4 + std::size_t{body_len};
  }
  if (c.closed || c.close_after_flush) return false;
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  return true;
}

void TcpStoreServer::Impl::hello(std::uint64_t id, Client& c, Reader& r) {
  const std::uint32_t version = r.u32();
  if (version != kProtocolVersion) {
    refuse(c, fmt::format("protocol version {} is not this store's version {}", version,
                          kProtocolVersion));
    return;
  }
  const std::string token = r.str();
  const std::string job_id = r.str();
  const std::int64_t world_size = r.i64();
  const std::int64_t rank = r.i64();
  if (!same_secret(token, job.token)) {
    refuse(c,
           "wrong token: this store serves another job (every rank needs the same "
           "MCR_STORE_TOKEN)");
    return;
  }
  if (job_id != job.job_id) {
    refuse(c, fmt::format("job id '{}' is not this store's job '{}': another job uses this port",
                          job_id, job.job_id));
    return;
  }
  if (job.world_size > 0 && world_size > 0 && world_size != job.world_size) {
    refuse(c, fmt::format("world size {} is not this store's world size {}: another job uses this "
                          "port",
                          world_size, job.world_size));
    return;
  }
  if (rank < -1 || (job.world_size > 0 && rank >= job.world_size)) {
    refuse(c, fmt::format("rank {} is outside this job's world of {}", rank, job.world_size));
    return;
  }
  if (rank >= 0) {
    auto [it, fresh] = rank_client.try_emplace(static_cast<int>(rank), id);
    if (!fresh) {
      auto other = clients.find(it->second);
      refuse(c, fmt::format("rank {} is already connected (from {}): another job with the same "
                            "world size uses this port, or a rank was started twice",
                            rank, other != clients.end() ? other->second.peer : "?"));
      return;
    }
  }
  c.rank = static_cast<int>(rank);
  c.hello_done = true;
  reply(c, encode_reply(Status::ok));
}

void TcpStoreServer::Impl::store(const std::string& key, Bytes value) {
  auto it = data.find(key);
  if (it != data.end()) {
    stored_bytes -= it->second.size();
    stored_bytes += value.size();
    it->second = std::move(value);
  } else {
    stored_bytes += key.size() + value.size();
    data.emplace(key, std::move(value));
  }
}

void TcpStoreServer::Impl::handle(std::uint64_t id, Client& c, const std::uint8_t* body,
                                  std::size_t n) {
  try {
    Reader r(body, n);
    const auto command = static_cast<Command>(r.u8());
    if (!c.hello_done) {
      if (command != Command::hello) {
        refuse(c, "the first request must be a hello carrying the job's token");
        return;
      }
      if (closing || ranks_leaving.load()) {
        // Accepted before the goodbye, or while the owner waits for this runtime's ranks to leave:
        // closed unanswered, which a client takes as "try again" (until the next runtime's store
        // listens). Let in, a rank that finished finalize and called init again would read this
        // runtime's keys, and the owner would wait for it to leave until its timeout.
        drop(c, "a hello while the store's owner goes away");
        return;
      }
      hello(id, c, r);
      return;
    }
    // While the owner goes away, requests that can be answered at once still are (a rank writing
    // its error message reads its peers' progress then); only waiting is refused, with the reason.
    auto key_of = [&r]() {
      std::string key = r.str();
      if (key.size() > kMaxKeyBytes) {
        throw ProtocolError(fmt::format("key of {} bytes exceeds {}", key.size(), kMaxKeyBytes));
      }
      return key;
    };
    switch (command) {
      case Command::hello:
        reply(c, encode_reply(Status::error, "hello sent twice"));
        return;
      case Command::set: {
        std::string key = key_of();
        Bytes value = r.blob();
        if (value.size() > kMaxValueBytes) {
          reply(c, encode_reply(Status::error, fmt::format("value of {} bytes exceeds {}",
                                                           value.size(), kMaxValueBytes)));
          return;
        }
        const auto old = data.find(key);
        const std::size_t after = stored_bytes + key.size() + value.size() -
                                  (old != data.end() ? key.size() + old->second.size() : 0);
        if (after > kMaxStoredBytes) {
          reply(c, encode_reply(Status::error, fmt::format("store full: {} bytes held, limit {}",
                                                           stored_bytes, kMaxStoredBytes)));
          return;
        }
        store(key, std::move(value));
        reply(c, encode_reply(Status::ok));
        serve_waiters(key);
        return;
      }
      case Command::get: {
        std::string key = key_of();
        auto timeout = std::chrono::milliseconds(
            std::min<std::uint64_t>(r.u64(), std::uint64_t{24} * 3600 * 1000));
        auto it = data.find(key);
        if (it != data.end()) {
          reply(c, encode_reply(Status::ok, it->second.data(), it->second.size()));
        } else if (timeout.count() == 0) {
          reply(c, encode_reply(Status::timed_out));
        } else if (closing) {
          reply(c, encode_reply(Status::error, kGoodbye));
        } else {
          waiters.push_back({id, std::move(key), Clock::now() + timeout});
          c.waiting = true;
        }
        return;
      }
      case Command::add: {
        std::string key = key_of();
        const std::int64_t delta = r.i64();
        std::int64_t value = 0;
        auto it = data.find(key);
        if (it != data.end()) {
          const char* first = reinterpret_cast<const char*>(it->second.data());
          const char* last = first + it->second.size();
          auto [ptr, ec] = std::from_chars(first, last, value);
          if (ec != std::errc() || ptr != last) {
            reply(c, encode_reply(
                         Status::error,
                         fmt::format("add: key '{}' holds a value that is not an integer", key)));
            return;
          }
        }
        value += delta;
        const std::string text = std::to_string(value);
        store(key, Bytes(text.begin(), text.end()));
        Writer w;
        w.i64(value);
        reply(c, encode_reply(Status::ok, w.bytes().data(), w.bytes().size()));
        serve_waiters(key);
        return;
      }
      case Command::check: {
        const std::uint32_t count = r.u32();
        bool all = true;
        for (std::uint32_t i = 0; i < count; ++i)
          all = data.count(key_of()) != 0 && all;
        const std::uint8_t flag = all ? 1 : 0;
        reply(c, encode_reply(Status::ok, &flag, 1));
        return;
      }
    }
    reply(c, encode_reply(Status::error, "unknown command"));
  } catch (const ProtocolError& e) {
    if (!c.hello_done) {
      refuse(c, fmt::format("malformed hello: {}", e.what()));
      return;
    }
    reply(c, encode_reply(Status::error, fmt::format("malformed request: {}", e.what())));
  }
}

void TcpStoreServer::Impl::reply(Client& c, Bytes bytes) {
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  }
  if (c.pending_out() + bytes.size() > kMaxQueuedReplyBytes) {
    drop(c, fmt::format("more than {} bytes of replies are queued: the client does not read them",
                        kMaxQueuedReplyBytes));
    return;
  }
  c.out.insert(c.out.end(), bytes.begin(), bytes.end());
  flush(c);
}

void TcpStoreServer::Impl::flush(Client& c) {
  while (c.out_sent < c.out.size()) {
    ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT resumes it
    if (n < 0) {
      log_debug("TCP store server: send to {} (rank {}) failed: {}; connection closed", c.peer,
                c.rank, errno_text(errno));
    }
    c.closed = true;
    return;
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.close_after_flush) c.closed = true;
}

void TcpStoreServer::Impl::serve_waiters(const std::string& key) {
  auto it = data.find(key);
  if (it == data.end()) return;
  for (auto w = waiters.begin(); w != waiters.end();) {
    if (w->key != key) {
      ++w;
      continue;
    }
    auto c = clients.find(w->client);
    if (c != clients.end() && !c->second.closed) {
      reply(c->second, encode_reply(Status::ok, it->second.data(), it->second.size()));
      resumed.push_back(w->client);
    }
    w = waiters.erase(w);
  }
  resume_answered();
}

void TcpStoreServer::Impl::expire_waiters() {
  const auto now = Clock::now();
  for (auto w = waiters.begin(); w != waiters.end();) {
    if (w->deadline > now) {
      ++w;
      continue;
    }
    auto c = clients.find(w->client);
    if (c != clients.end() && !c->second.closed) {
      reply(c->second, encode_reply(Status::timed_out));
      resumed.push_back(w->client);
    }
    w = waiters.erase(w);
  }
  resume_answered();
}

void TcpStoreServer::Impl::resume_answered() {
  // After the loops over `waiters`: a resumed request may set a key, which serves (and erases)
  // waiters again.
  std::vector<std::uint64_t> ids;
  ids.swap(resumed);
  for (const std::uint64_t id : ids) {
    auto c = clients.find(id);
    if (c == clients.end()) continue;
    c->second.waiting = false;
    if (!c->second.closed) take_frames(id, c->second);
  }
}

void TcpStoreServer::Impl::expire_hellos() {
  const auto now = Clock::now();
  for (auto& [id, c] : clients) {
    if (!c.hello_done && !c.closed && !c.close_after_flush &&
        now - c.accepted_at >= kHelloDeadline) {
      drop(c, fmt::format("no hello within {} s", kHelloDeadline.count()));
    }
  }
}

}  // namespace mcr::detail
