#include "bootstrap/tcp_store.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <source_location>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "log.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

using Clock = std::chrono::steady_clock;

enum class Command : std::uint8_t { set = 1, get = 2, add = 3, check = 4 };
enum class Status : std::uint8_t { ok = 0, timed_out = 1, error = 2 };

// A request body larger than this is a protocol error (garbage on the port), not a real value.
constexpr std::uint32_t kMaxBodyBytes = 1u << 30;
// A waiting get is served in slices of at most this long, so a client connection shared by
// several threads is never held by one of them for long.
constexpr std::chrono::milliseconds kGetSlice{100};
// A reply slower than this means the server is gone (it answers every request within a slice).
constexpr int kReplyTimeoutSeconds = 60;

std::string_view file_name(const std::source_location& loc) {
  std::string_view f = loc.file_name();
  auto slash = f.rfind('/');
  return slash == std::string_view::npos ? f : f.substr(slash + 1);
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

[[noreturn]] void throw_socket_error(std::string_view call, int err,
                                     std::source_location loc = std::source_location::current()) {
  throw BackendError(fmt::format("TCP store: {} failed at {}:{}: {}", call, file_name(loc),
                                 loc.line(), errno_text(err)));
}

// ---- little-endian encoding ----------------------------------------------------------------

class Writer {
 public:
  void u8(std::uint8_t v) { buf_.push_back(v); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
  void blob(const void* data, std::size_t n) {
    u64(n);
    const auto* p = static_cast<const std::uint8_t*>(data);
    buf_.insert(buf_.end(), p, p + n);
  }
  void str(std::string_view s) { blob(s.data(), s.size()); }
  Bytes& bytes() { return buf_; }

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      buf_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  Bytes buf_;
};

struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t n) : p_(data), end_(data + n) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() { return get(8); }
  std::int64_t i64() { return static_cast<std::int64_t>(get(8)); }
  Bytes blob() {
    std::uint64_t n = u64();
    need(n);
    Bytes out(p_, p_ + n);
    p_ += n;
    return out;
  }
  std::string str() {
    std::uint64_t n = u64();
    need(n);
    std::string out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return out;
  }

 private:
  void need(std::uint64_t n) const {
    if (n > static_cast<std::uint64_t>(end_ - p_)) throw ProtocolError("truncated message");
  }
  std::uint64_t get(int n) {
    need(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(p_[i]) << (8 * i);
    p_ += n;
    return v;
  }
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

Bytes encode_reply(Status status, const void* payload, std::size_t n) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(status));
  w.blob(payload, n);
  return std::move(w.bytes());
}
Bytes encode_reply(Status status, std::string_view payload = {}) {
  return encode_reply(status, payload.data(), payload.size());
}

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) ::freeaddrinfo(head);
  }
};

void set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    throw_socket_error("setsockopt(TCP_NODELAY)", errno);
  }
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) throw_socket_error("fcntl(F_GETFL)", errno);
  if (::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw_socket_error("fcntl(F_SETFL)", errno);
}

}  // namespace

// =================================================================================================
// Server
// =================================================================================================

struct TcpStoreServer::Impl {
  struct Client {
    UniqueFd fd;
    Bytes in;
    Bytes out;
    std::size_t out_sent = 0;
    bool closed = false;
  };
  struct Waiter {
    std::uint64_t client;
    std::string key;
    Clock::time_point deadline;
  };

  UniqueFd listen_fd;
  UniqueFd wake_read;
  UniqueFd wake_write;
  int port = 0;
  std::thread thread;

  // Everything below is touched only by the server thread.
  std::map<std::string, Bytes> data;
  std::unordered_map<std::uint64_t, Client> clients;
  std::vector<Waiter> waiters;
  std::uint64_t next_client = 1;

  void run() noexcept;
  void accept_clients();
  void read_from(std::uint64_t id, Client& c);
  void handle(std::uint64_t id, Client& c, const std::uint8_t* body, std::size_t n);
  void reply(Client& c, Bytes bytes);
  void flush(Client& c);
  void serve_waiters(const std::string& key);
  void expire_waiters();
  int poll_timeout_ms() const;
};

TcpStoreServer::TcpStoreServer(const std::string& bind_host, int port) : impl_(new Impl) {
  if (port < 0 || port > 65535) {
    throw InvalidArgument(fmt::format("TcpStoreServer: port {} is outside [0, 65535]", port));
  }
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
  const char stop = 's';
  // A failed wake-up write can only mean the pipe is full, which already wakes the thread.
  [[maybe_unused]] auto written = ::write(impl_->wake_write.get(), &stop, 1);
  if (impl_->thread.joinable()) impl_->thread.join();
}

int TcpStoreServer::port() const noexcept {
  return impl_->port;
}

int TcpStoreServer::Impl::poll_timeout_ms() const {
  if (waiters.empty()) return -1;
  auto earliest = std::min_element(waiters.begin(), waiters.end(), [](auto& a, auto& b) {
                    return a.deadline < b.deadline;
                  })->deadline;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(earliest - Clock::now()).count();
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
      short events = POLLIN;
      if (c.out_sent < c.out.size()) events |= POLLOUT;
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
    }
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (rc < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "mcr: TCP store server: poll failed: %s; server stops\n",
                   errno_text(errno).c_str());
      return;
    }
    if (fds[0].revents != 0) return;  // destructor asked us to stop
    if (fds[1].revents & POLLIN) accept_clients();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto it = clients.find(ids[i]);
      if (it == clients.end()) continue;
      Client& c = it->second;
      const short rev = fds[i + 2].revents;
      if (rev & (POLLIN | POLLHUP | POLLERR)) read_from(ids[i], c);
      if ((rev & POLLOUT) && !c.closed) flush(c);
    }
    expire_waiters();
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->second.closed) {
        const auto id = it->first;
        std::erase_if(waiters, [id](const Waiter& w) { return w.client == id; });
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void TcpStoreServer::Impl::accept_clients() {
  for (;;) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // latency only: best effort
    clients.emplace(next_client++, std::move(c));
  }
}

void TcpStoreServer::Impl::read_from(std::uint64_t id, Client& c) {
  std::uint8_t chunk[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      c.in.insert(c.in.end(), chunk, chunk + n);
      continue;
    }
    if (n == 0) {
      c.closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.closed = true;
    break;
  }
  std::size_t pos = 0;
  while (!c.closed && c.in.size() - pos >= 4) {
    Reader header(c.in.data() + pos, 4);
    const std::uint32_t body_len = header.u32();
    if (body_len == 0 || body_len > kMaxBodyBytes) {
      c.closed = true;  // not our protocol
      break;
    }
    if (c.in.size() - pos - 4 < body_len) break;
    handle(id, c, c.in.data() + pos + 4, body_len);
    pos += 4 + std::size_t{body_len};
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
}

void TcpStoreServer::Impl::handle(std::uint64_t id, Client& c, const std::uint8_t* body,
                                  std::size_t n) {
  try {
    Reader r(body, n);
    switch (static_cast<Command>(r.u8())) {
      case Command::set: {
        std::string key = r.str();
        data[key] = r.blob();
        reply(c, encode_reply(Status::ok));
        serve_waiters(key);
        return;
      }
      case Command::get: {
        std::string key = r.str();
        auto timeout = std::chrono::milliseconds(r.u64());
        auto it = data.find(key);
        if (it != data.end()) {
          reply(c, encode_reply(Status::ok, it->second.data(), it->second.size()));
        } else if (timeout.count() == 0) {
          reply(c, encode_reply(Status::timed_out));
        } else {
          waiters.push_back({id, std::move(key), Clock::now() + timeout});
        }
        return;
      }
      case Command::add: {
        std::string key = r.str();
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
        data[key] = Bytes(text.begin(), text.end());
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
          all = data.count(r.str()) != 0 && all;
        const std::uint8_t flag = all ? 1 : 0;
        reply(c, encode_reply(Status::ok, &flag, 1));
        return;
      }
    }
    reply(c, encode_reply(Status::error, "unknown command"));
  } catch (const ProtocolError& e) {
    reply(c, encode_reply(Status::error, fmt::format("malformed request: {}", e.what())));
  }
}

void TcpStoreServer::Impl::reply(Client& c, Bytes bytes) {
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
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
    c.closed = true;
    return;
  }
  c.out.clear();
  c.out_sent = 0;
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
    }
    w = waiters.erase(w);
  }
}

void TcpStoreServer::Impl::expire_waiters() {
  const auto now = Clock::now();
  for (auto w = waiters.begin(); w != waiters.end();) {
    if (w->deadline > now) {
      ++w;
      continue;
    }
    auto c = clients.find(w->client);
    if (c != clients.end() && !c->second.closed) reply(c->second, encode_reply(Status::timed_out));
    w = waiters.erase(w);
  }
}

// =================================================================================================
// Client
// =================================================================================================

namespace {

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(UniqueFd fd, std::string where) : fd_(std::move(fd)), where_(std::move(where)) {}

  void set(const std::string& key, const Bytes& value) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::set));
    w.str(key);
    w.blob(value.data(), value.size());
    std::lock_guard lock(mu_);
    expect_ok(round_trip(w.bytes()), "set", key);
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      const auto slice = std::clamp(left, std::chrono::milliseconds(0), kGetSlice);
      Writer w;
      w.u8(static_cast<std::uint8_t>(Command::get));
      w.str(key);
      w.u64(static_cast<std::uint64_t>(slice.count()));
      Reply r;
      {
        std::lock_guard lock(mu_);
        r = round_trip(w.bytes());
      }
      if (r.status == Status::ok) return std::move(r.payload);
      if (r.status != Status::timed_out) expect_ok(r, "get", key);
      if (Clock::now() >= deadline) {
        throw TimeoutError(fmt::format("TCP store {}: key '{}' was not set within {} ms", where_,
                                       key, timeout.count()),
                           "store_get", 0, "tcp_store");
      }
    }
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::add));
    w.str(key);
    w.i64(delta);
    Reply r;
    {
      std::lock_guard lock(mu_);
      r = round_trip(w.bytes());
    }
    expect_ok(r, "add", key);
    Reader rd(r.payload.data(), r.payload.size());
    return rd.i64();
  }

  bool check(const std::vector<std::string>& keys) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::check));
    w.u32(static_cast<std::uint32_t>(keys.size()));
    for (const auto& k : keys)
      w.str(k);
    Reply r;
    {
      std::lock_guard lock(mu_);
      r = round_trip(w.bytes());
    }
    expect_ok(r, "check", keys.empty() ? std::string() : keys.front());
    return !r.payload.empty() && r.payload[0] != 0;
  }

 private:
  struct Reply {
    Status status = Status::error;
    Bytes payload;
  };

  void expect_ok(const Reply& r, std::string_view op, const std::string& key) const {
    if (r.status == Status::ok) return;
    throw BackendError(fmt::format("TCP store {}: {} '{}' failed on the server: {}", where_, op,
                                   key, std::string(r.payload.begin(), r.payload.end())));
  }

  // Sends one request and reads its reply. Caller holds mu_.
  Reply round_trip(const Bytes& body) {
    Writer frame;
    frame.u32(static_cast<std::uint32_t>(body.size()));
    Bytes& out = frame.bytes();
    out.insert(out.end(), body.begin(), body.end());
    send_all(out.data(), out.size());

    std::uint8_t header[9];
    recv_all(header, sizeof header);
    Reader hr(header, sizeof header);
    Reply r;
    r.status = static_cast<Status>(hr.u8());
    const std::uint64_t n = hr.u64();
    if (n > kMaxBodyBytes) {
      throw BackendError(
          fmt::format("TCP store {}: reply of {} bytes is not our protocol", where_, n));
    }
    r.payload.resize(n);
    if (n > 0) recv_all(r.payload.data(), n);
    return r;
  }

  void send_all(const std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      ssize_t k = ::send(fd_.get(), p, n, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        throw_socket_error(fmt::format("send to {}", where_), errno);
      }
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  void recv_all(std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      ssize_t k = ::recv(fd_.get(), p, n, 0);
      if (k == 0) {
        throw BackendError(fmt::format("TCP store {}: the server closed the connection", where_));
      }
      if (k < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          throw BackendError(fmt::format("TCP store {}: no reply from the server within {} s",
                                         where_, kReplyTimeoutSeconds));
        }
        throw_socket_error(fmt::format("recv from {}", where_), errno);
      }
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  UniqueFd fd_;
  std::string where_;
  std::mutex mu_;
};

bool is_retryable_connect_error(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EINTR;
}

}  // namespace

std::unique_ptr<Store> connect_tcp_store(const std::string& host, int port,
                                         std::chrono::milliseconds timeout) {
  if (host.empty()) throw InvalidArgument("connect_tcp_store: host is empty");
  if (port <= 0 || port > 65535) {
    throw InvalidArgument(fmt::format("connect_tcp_store: port {} is outside [1, 65535]", port));
  }
  const std::string where = fmt::format("{}:{}", host, port);
  const auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(5);
  std::string last_error = "no attempt made";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    AddrInfoList list;
    const std::string port_text = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &list.head);
    if (rc != 0 && rc != EAI_AGAIN) {
      throw BackendError(fmt::format("TCP store: getaddrinfo('{}') failed at {}:{}: {}", host,
                                     file_name(std::source_location::current()), __LINE__,
                                     ::gai_strerror(rc)));
    }
    if (rc == EAI_AGAIN) last_error = ::gai_strerror(rc);
    for (addrinfo* ai = rc == 0 ? list.head : nullptr; ai != nullptr; ai = ai->ai_next) {
      UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (fd.get() < 0) throw_socket_error("socket", errno);
      if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
        set_nodelay(fd.get());
        timeval tv{kReplyTimeoutSeconds, 0};
        if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
          throw_socket_error("setsockopt(SO_RCVTIMEO)", errno);
        }
        return std::make_unique<TcpStoreClient>(std::move(fd), where);
      }
      const int err = errno;
      if (!is_retryable_connect_error(err))
        throw_socket_error(fmt::format("connect({})", where), err);
      last_error = errno_text(err);
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      throw TimeoutError(fmt::format("TCP store: could not connect to {} within {} ms (last "
                                     "error: {})",
                                     where, timeout.count(), last_error),
                         "store_connect", 0, "tcp_store");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace mcr::detail
