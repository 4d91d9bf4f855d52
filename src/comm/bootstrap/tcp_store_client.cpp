// The TCP store's client: one connection per process, shared by its threads under a mutex; every
// request is a round trip, a waiting get is served in slices (store_wire.hpp's kGetSlice). The
// connection opens with a hello naming the job; every key is prefixed with the job id.
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
#include <functional>
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
#include "core/log.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {

using namespace store_wire;  // NOLINT(google-build-using-namespace): this file speaks the wire
                             // format

// =================================================================================================

namespace {

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(UniqueFd fd, std::string where, std::string prefix,
                 std::chrono::milliseconds reply_timeout)
      : fd_(std::move(fd)),
        where_(std::move(where)),
        prefix_(std::move(prefix)),
        reply_timeout_(reply_timeout) {}

  // The first request of the connection. Returns false when the server closed the connection
  // before answering (it was full, or its owner is going away and the next owner's store will
  // listen on the port: worth another try); throws when it refused this process.
  bool hello(const StoreJob& job, int rank) {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::hello));
    w.u32(kProtocolVersion);
    w.str(job.token);
    w.str(job.job_id);
    w.i64(job.world_size);
    w.i64(rank);
    // The server drops a longer hello unanswered, which read as "busy, try again" until the
    // timeout. Every rank has the same token and job id, so every rank raises here alike.
    if (w.bytes().size() > kMaxHelloBytes) {
      throw InvalidArgument(fmt::format(
          "TCP store {}: the store token ({} bytes: MCR_STORE_TOKEN, or torchrun's run id) and the "
          "job id '{}' ({} bytes) make a hello of {} bytes, over the store's {}: use a shorter "
          "MCR_STORE_TOKEN or --rdzv-id",
          where_, job.token.size(),
          job.job_id.size() > 64 ? job.job_id.substr(0, 64) + "..." : job.job_id, job.job_id.size(),
          w.bytes().size(), kMaxHelloBytes));
    }
    Reply r;
    try {
      std::lock_guard lock(mu_);
      r = round_trip(w.bytes());
    } catch (const ClosedByServer&) {
      return false;
    } catch (const BackendError& e) {
      // Something accepted the connection but does not answer as a store: most often another
      // program that holds the port (a busy MASTER_PORT), or a store that is not mcr's.
      throw BackendError(fmt::format(
          "{}; the process listening on {} did not answer rank {}'s hello as mcr's rendezvous "
          "store: is the port used by another program (choose a free MASTER_PORT), or is rank 0 "
          "so loaded that it cannot answer?",
          e.what(), where_, rank));
    }
    if (r.status != Status::ok) {
      throw BackendError(fmt::format("TCP store {}: the server refused this process (rank {}): {}",
                                     where_, rank,
                                     std::string(r.payload.begin(), r.payload.end())));
    }
    return true;
  }

  void set(const std::string& key, const Bytes& value) override {
    if (value.size() > kMaxValueBytes) {
      throw InvalidArgument(fmt::format(
          "TCP store {}: set '{}': value of {} bytes exceeds the store's limit of {} bytes", where_,
          key, value.size(), kMaxValueBytes));
    }
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::set));
    w.str(wire_key(key));
    w.blob(value.data(), value.size());
    std::lock_guard lock(mu_);
    expect_ok(round_trip(w.bytes()), "set", key);
  }

  std::string description() const override { return "tcp store"; }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      const auto slice = std::clamp(left, std::chrono::milliseconds(0), kGetSlice);
      Writer w;
      w.u8(static_cast<std::uint8_t>(Command::get));
      w.str(wire_key(key));
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
    w.str(wire_key(key));
    w.i64(delta);
    Reply r;
    {
      std::lock_guard lock(mu_);
      r = round_trip(w.bytes());
    }
    expect_ok(r, "add", key);
    Reader rd(r.payload.data(), r.payload.size());
    try {
      return rd.i64();
    } catch (const ProtocolError& e) {
      throw BackendError(
          fmt::format("TCP store {}: add '{}': the server's reply of {} bytes is "
                      "not a count ({})",
                      where_, key, r.payload.size(), e.what()));
    }
  }

  // A `check` of no keys, whose reply is awaited at most `bound`. A reply that comes later is
  // still owed on the stream (late_replies_): the next request reads and drops it first, and the
  // next probe waits for it at most `bound` before sending its own.
  bool responds_within(std::chrono::milliseconds bound) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::check));
    w.u32(0);
    // The connection may be held by another thread's request (the watchdog publishing progress)
    // that waits the whole reply timeout for a store that is gone: that is no answer either.
    std::unique_lock lock(mu_, bound);
    if (!lock.owns_lock()) return false;
    if (!broken_.empty()) return false;
    try {
      for (; late_replies_ > 0; --late_replies_) {
        if (!readable_within(bound)) return false;
        read_reply();
      }
      send_frame(w.bytes());
      if (!readable_within(bound)) {
        ++late_replies_;
        return false;
      }
      read_reply();
    } catch (const std::exception& e) {
      give_up(e.what());
      return false;
    }
    return true;
  }

  bool check(const std::vector<std::string>& keys) override {
    Writer w;
    w.u8(static_cast<std::uint8_t>(Command::check));
    w.u32(static_cast<std::uint32_t>(keys.size()));
    for (const auto& k : keys)
      w.str(wire_key(k));
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
  struct ClosedByServer : BackendError {
    using BackendError::BackendError;
  };
  struct ReplyTimeout : BackendError {
    ReplyTimeout(const std::string& what, bool nothing)
        : BackendError(what), read_nothing(nothing) {}
    bool read_nothing;  // not one byte of the reply had come: the stream is still in place
  };

  // The key on the wire: the job id first, so that jobs can never read each other's keys.
  std::string wire_key(const std::string& key) const {
    if (prefix_.size() + key.size() > kMaxKeyBytes) {
      throw InvalidArgument(
          fmt::format("TCP store {}: key '{:.64}...' of {} bytes exceeds the "
                      "store's limit of {} bytes (with the job prefix)",
                      where_, key, key.size(), kMaxKeyBytes - prefix_.size()));
    }
    return prefix_ + key;
  }

  void expect_ok(const Reply& r, std::string_view op, const std::string& key) const {
    if (r.status == Status::ok) return;
    throw BackendError(fmt::format("TCP store {}: {} '{}' failed on the server: {}", where_, op,
                                   key, std::string(r.payload.begin(), r.payload.end())));
  }

  // Sends one request and reads its reply. Caller holds mu_.
  //
  // Replies come back in the order of the requests, so the stream must never lose its place. A
  // reply that does not come within the reply timeout, not one byte of it, is still owed: it is
  // read and dropped before the next request's (late_replies_). After any other failure the
  // place is unknown (a part of a reply read or of a request sent, a reply that is not ours): the
  // connection is given up, and every later request fails with the reason, rather than read a
  // reply meant for an earlier request as its own.
  Reply round_trip(const Bytes& body) {
    if (!broken_.empty()) {
      throw BackendError(
          fmt::format("TCP store {}: this process's connection was given up after "
                      "an earlier failure: {}",
                      where_, broken_));
    }
    try {
      drain_late_replies();
      send_frame(body);
    } catch (const ReplyTimeout& e) {
      if (e.read_nothing) throw;  // an owed reply still late: nothing was sent, nothing lost
      give_up(e.what());
      throw;
    } catch (const std::exception& e) {
      give_up(e.what());
      throw;
    }
    try {
      return read_reply();
    } catch (const ReplyTimeout& e) {
      if (!e.read_nothing) {
        give_up(e.what());
      } else {
        ++late_replies_;
      }
      throw;
    } catch (const std::exception& e) {
      give_up(e.what());
      throw;
    }
  }

  void give_up(std::string_view why) {
    if (broken_.empty()) broken_ = why.empty() ? std::string("(no reason)") : std::string(why);
  }

  void send_frame(const Bytes& body) {
    Writer frame;
    frame.u32(static_cast<std::uint32_t>(body.size()));
    Bytes& out = frame.bytes();
    out.insert(out.end(), body.begin(), body.end());
    send_all(out.data(), out.size());
  }

  bool readable_within(std::chrono::milliseconds bound) {
    pollfd p{fd_.get(), POLLIN, 0};
    // A signal restarts the wait with what is left of `bound`, not with all of it: a process that
    // takes signals more often than `bound` (a sampling profiler, an interval timer) still ends.
    const auto until = Clock::now() + bound;
    int ready = 0;
    do {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    } while (ready < 0 && errno == EINTR);
    return ready > 0;
  }

  // A send or recv that a signal interrupted is retried unless the socket's timeout has passed
  // since the last byte moved. SO_RCVTIMEO/SO_SNDTIMEO restart with every call, so without this a
  // signal arriving more often than the timeout (a sampling profiler, an interval timer) would
  // keep a request to a frozen server waiting for ever; with it, a request gives up within twice
  // the timeout.
  bool retry_after_signal(Clock::time_point last_progress) const {
    return Clock::now() - last_progress < reply_timeout_;
  }

  // Replies owed to requests whose caller stopped waiting (responds_within, a reply timeout): read
  // and dropped, in order, so that the next reply read belongs to the next request. Caller holds
  // mu_.
  void drain_late_replies() {
    for (; late_replies_ > 0; --late_replies_)
      read_reply();
  }

  Reply read_reply() {
    std::uint8_t header[9];
    recv_all(header, sizeof header, /*reply_start=*/true);
    Reader hr(header, sizeof header);
    Reply r;
    r.status = static_cast<Status>(hr.u8());
    const std::uint64_t n = hr.u64();
    if (n > kMaxValueBytes + 4096) {
      throw BackendError(
          fmt::format("TCP store {}: reply of {} bytes is not our protocol", where_, n));
    }
    r.payload.resize(n);
    if (n > 0) recv_all(r.payload.data(), n);
    return r;
  }

  void send_all(const std::uint8_t* p, std::size_t n) {
    auto last_progress = Clock::now();
    while (n > 0) {
      ssize_t k = ::send(fd_.get(), p, n, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR && retry_after_signal(last_progress)) continue;
        if (errno == ECONNRESET || errno == EPIPE) {
          throw ClosedByServer(fmt::format("TCP store {}: the server closed the connection ({})",
                                           where_,
                                           errno == EPIPE ? "broken pipe" : "reset by peer"));
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
          throw BackendError(fmt::format(
              "TCP store {}: the server took no more of a request for {} ms (its host stopped, or "
              "it is overloaded)",
              where_, reply_timeout_.count()));
        }
        throw_socket_error(fmt::format("send to {}", where_), errno);
      }
      last_progress = Clock::now();
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  // `reply_start`: `p` is the beginning of a reply, so a timeout before its first byte leaves the
  // stream in place (ReplyTimeout::read_nothing).
  void recv_all(std::uint8_t* p, std::size_t n, bool reply_start = false) {
    const std::size_t wanted = n;
    auto last_progress = Clock::now();
    while (n > 0) {
      ssize_t k = ::recv(fd_.get(), p, n, 0);
      if (k == 0) {
        throw ClosedByServer(fmt::format("TCP store {}: the server closed the connection", where_));
      }
      if (k < 0) {
        if (errno == EINTR && retry_after_signal(last_progress)) continue;
        // A server that closes a connection with our request still unread (it was full when it
        // accepted us) makes the kernel answer with a reset, not an orderly close: the same event.
        if (errno == ECONNRESET) {
          throw ClosedByServer(fmt::format(
              "TCP store {}: the server closed the connection (reset by peer)", where_));
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
          throw ReplyTimeout(fmt::format("TCP store {}: no reply from the server within {} ms",
                                         where_, reply_timeout_.count()),
                             reply_start && n == wanted);
        }
        throw_socket_error(fmt::format("recv from {}", where_), errno);
      }
      last_progress = Clock::now();
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }

  UniqueFd fd_;
  std::string where_;
  std::string prefix_;
  std::chrono::milliseconds reply_timeout_;
  std::timed_mutex mu_;
  int late_replies_ = 0;  // guarded by mu_
  std::string broken_;    // guarded by mu_: why the connection was given up (round_trip)
};

bool connected_to_itself(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_len = sizeof local;
  socklen_t peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return local_len == peer_len && std::memcmp(&local, &peer, local_len) == 0;
}

bool is_retryable_connect_error(int err) {
  // EINPROGRESS: a connect that SO_SNDTIMEO cut short (a host that drops the SYNs).
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EINTR || err == EINPROGRESS;
}

void set_socket_timeout(int fd, int option, const char* name, std::chrono::milliseconds t) {
  t = std::max(t, std::chrono::milliseconds(1));
  timeval tv{static_cast<time_t>(t.count() / 1000),
             static_cast<suseconds_t>((t.count() % 1000) * 1000)};
  if (::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv) != 0) throw_socket_error(name, errno);
}

}  // namespace

namespace {

// One pass over the addresses a name resolved to: the connected client, or nullptr when none
// answered yet in a way worth retrying (`last_error` says how). An address this host cannot use
// (socket() refuses its family: IPv6 turned off; a connect error no retry helps) is passed over for
// the next one (localhost's ::1 after 127.0.0.1, which refused while the server was not yet
// listening, ended the connect at once); only when every address fails so is that an error.
std::unique_ptr<Store> try_addresses(const addrinfo* list, const std::string& where,
                                     Clock::time_point deadline, std::chrono::milliseconds timeout,
                                     const StoreJob& job, int rank, std::string& last_error) {
  bool worth_retrying = list == nullptr;
  int fatal_errno = 0;
  std::string fatal_call;
  const auto unusable = [&](std::string call, int err) {
    if (fatal_call.empty()) fatal_call = std::move(call), fatal_errno = err;
  };
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.get() < 0) {
      unusable(fmt::format("socket(family {})", ai->ai_family), errno);
      continue;
    }
    // On Linux SO_SNDTIMEO bounds connect() too: a host that drops the SYNs would otherwise
    // hold it for the kernel's retries (about two minutes), whatever is left of `timeout`.
    set_socket_timeout(fd.get(), SO_SNDTIMEO, "setsockopt(SO_SNDTIMEO)",
                       std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      worth_retrying = true;
      if (connected_to_itself(fd.get())) {
        // Retrying a loopback port nobody listens on yet can pick that very port as the source
        // and "connect" to itself (TCP simultaneous open); that is not the server.
        last_error = "connected to itself while the server was not yet listening";
        continue;
      }
      set_nodelay(fd.get());
      // The server answers every request within a get slice; a reply slower than the job's
      // timeout means it is gone.
      // A request that the server does not take in (its buffers full, its host frozen) fails
      // after as long, rather than blocking its sender.
      const auto reply_timeout = std::max(timeout, std::chrono::milliseconds(1000));
      set_socket_timeout(fd.get(), SO_RCVTIMEO, "setsockopt(SO_RCVTIMEO)", reply_timeout);
      set_socket_timeout(fd.get(), SO_SNDTIMEO, "setsockopt(SO_SNDTIMEO)", reply_timeout);
      auto client =
          std::make_unique<TcpStoreClient>(std::move(fd), where, job.job_id + "/", reply_timeout);
      if (client->hello(job, rank)) return client;
      last_error =
          "the server closed the connection before answering the hello (full, or its owner "
          "going away?)";
      return nullptr;
    }
    const int err = errno;
    if (!is_retryable_connect_error(err)) {
      unusable(fmt::format("connect({})", where), err);
      continue;
    }
    worth_retrying = true;
    last_error = errno_text(err);
  }
  if (!worth_retrying) throw_socket_error(fatal_call, fatal_errno);
  return nullptr;
}

// The addresses for one pass (owned by `held` where they were resolved), or nullptr when the
// name did not resolve yet in a way worth retrying (`last_error` says how).
using ResolvePass = std::function<const addrinfo*(AddrInfoList& held, std::string& last_error)>;

// Connects over what `resolve` gives, pass after pass, until `timeout`.
std::unique_ptr<Store> connect_with_retries(const ResolvePass& resolve, const std::string& where,
                                            std::chrono::milliseconds timeout, const StoreJob& job,
                                            int rank) {
  const auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(5);
  std::string last_error = "no attempt made";
  for (;;) {
    AddrInfoList held;
    const addrinfo* list = resolve(held, last_error);
    if (auto client = try_addresses(list, where, deadline, timeout, job, rank, last_error)) {
      return client;
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

}  // namespace

std::unique_ptr<Store> connect_tcp_store(const std::string& host, int port,
                                         std::chrono::milliseconds timeout, const StoreJob& job,
                                         int rank) {
  if (host.empty()) throw InvalidArgument("connect_tcp_store: host is empty");
  if (port <= 0 || port > 65535) {
    throw InvalidArgument(fmt::format("connect_tcp_store: port {} is outside [1, 65535]", port));
  }
  const std::string port_text = std::to_string(port);
  const auto resolve = [&](AddrInfoList& held, std::string& last_error) -> const addrinfo* {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &held.head);
    if (rc != 0 && rc != EAI_AGAIN) {
      throw BackendError(fmt::format("TCP store: getaddrinfo('{}') failed at {}:{}: {}", host,
                                     file_name(std::source_location::current()), __LINE__,
                                     ::gai_strerror(rc)));
    }
    if (rc == EAI_AGAIN) {
      last_error = ::gai_strerror(rc);
      return nullptr;
    }
    return held.head;
  };
  return connect_with_retries(resolve, fmt::format("{}:{}", host, port), timeout, job, rank);
}

std::unique_ptr<Store> connect_tcp_store_to(const addrinfo* addresses, const std::string& where,
                                            std::chrono::milliseconds timeout, const StoreJob& job,
                                            int rank) {
  const auto fixed = [addresses](AddrInfoList&, std::string&) { return addresses; };
  return connect_with_retries(fixed, where, timeout, job, rank);
}

}  // namespace mcr::detail
