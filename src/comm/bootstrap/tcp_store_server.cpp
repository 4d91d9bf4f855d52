// The TCP store's server: one thread, poll() over a listening socket, its clients and a wake pipe;
// waiting gets are parked and served when their key is set or their deadline passes.
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

#include "bootstrap/store_socket.hpp"
#include "bootstrap/store_wire.hpp"
#include "log.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {

using namespace store_wire;  // NOLINT(google-build-using-namespace): this file speaks the wire
                             // format

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
}  // namespace mcr::detail
