// TCP key-value store: a server thread on one rank (rank 0 in every launch mode), clients on all.
//
// Wire protocol (all integers little-endian):
//   request: u32 body_length, u8 command, body
//     hello: u32 version, str token, str job_id, i64 world_size, i64 rank   (first, and only once)
//     set:   str key, blob value          get:   str key, u64 timeout_ms
//     add:   str key, i64 delta           check: u32 n, n x str key
//   reply:   u8 status (0 ok, 1 timed out, 2 error), u64 length, payload
//     ok payload: get -> value; add -> i64 new value; check -> u8 all present; set, hello -> empty
//     error payload: the server's message
//   str and blob are u64 length + bytes.
// A connection must open with a hello that carries the job's token and id; the server refuses any
// other first request, a wrong token, another job's id or world size, and a rank that is already
// connected, then closes the connection and goes on serving the others. Request sizes are capped
// (store_wire.hpp) before anything is buffered. A `get` waits on the server (no polling): the
// server answers as soon as the key is set or when the request's timeout expires. Counters written
// by `add` are stored as decimal text.
#pragma once

#include <netdb.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

/// Who may use a store: the job's secret token (empty: anyone who reaches the port), its id (the
/// client prefixes every key with it), and its world size (0: not checked).
struct StoreJob {
  std::string token;
  std::string job_id = "default";
  int world_size = 0;
};

/// Runs the store server in a background thread (poll-based, any number of clients). `bind_host`
/// empty or "0.0.0.0" listens on every interface; port 0 picks a free port (see port()).
/// Throws BackendError naming the failing socket call when it cannot listen.
class TcpStoreServer {
 public:
  /// What the server has seen, for diagnostics and tests.
  struct Stats {
    std::uint64_t accepted = 0;             ///< connections accepted
    std::uint64_t refused = 0;              ///< closed on accept: too many connections
    std::uint64_t rejected_hello = 0;       ///< closed: no, malformed or wrong hello
    std::uint64_t protocol_errors = 0;      ///< closed: oversized or malformed frame after hello
    std::uint64_t buffered_bytes = 0;       ///< request and reply bytes buffered right now
    std::uint64_t peak_buffered_bytes = 0;  ///< the most ever buffered at once, all connections
    std::uint64_t stored_bytes = 0;         ///< keys and values held
  };

  TcpStoreServer(const std::string& bind_host, int port, StoreJob job = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port the server listens on (the chosen one when constructed with port 0).
  int port() const noexcept;
  Stats stats() const noexcept;

  /// Blocks until no rank other than `except_rank` is connected, at most `limit`; returns whether
  /// they all left. The owner calls it before destroying the server, so that no rank still
  /// reading the store sees it vanish. From the first call on no rank is let in any more: a hello
  /// is closed unanswered, which a connecting client takes as "try again".
  bool wait_for_ranks_to_leave(int except_rank, std::chrono::milliseconds limit);

  /// How long the destructor keeps serving ranks that are still connected (default 2 s): it first
  /// answers their waiting and later requests with an error saying the store's owner is going
  /// away, so that they fail at once with that reason instead of a bare closed connection.
  void set_goodbye_grace(std::chrono::milliseconds grace) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Connects to the server at host:port, retrying until `timeout` (the server may start later), and
/// introduces itself as `rank` of `job` (rank -1: a process outside the world, e.g. a tool).
/// The returned store is safe to use from several threads; a blocking `get` waits on the server
/// in slices so that other threads sharing the connection are not starved. A server that does not
/// answer a request within `timeout` is taken for gone (BackendError).
/// Throws TimeoutError when no connection could be made within `timeout`, and BackendError naming
/// the address and the reason ("token", "job id", "world size", "rank") when the server refuses.
std::unique_ptr<Store> connect_tcp_store(const std::string& host, int port,
                                         std::chrono::milliseconds timeout,
                                         const StoreJob& job = {}, int rank = -1);

/// connect_tcp_store over `addresses` (a list as getaddrinfo gives) instead of resolving a name;
/// `where` names them in errors. For tests of how a list with unusable addresses is tried.
std::unique_ptr<Store> connect_tcp_store_to(const addrinfo* addresses, const std::string& where,
                                            std::chrono::milliseconds timeout,
                                            const StoreJob& job = {}, int rank = -1);

}  // namespace mcr::detail
