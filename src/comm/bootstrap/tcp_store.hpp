// TCP key-value store: a server thread on one rank (rank 0 in every launch mode), clients on all.
//
// Wire protocol (all integers little-endian):
//   request: u32 body_length, u8 command, body
//     set:   str key, blob value          get:   str key, u64 timeout_ms
//     add:   str key, i64 delta           check: u32 n, n x str key
//   reply:   u8 status (0 ok, 1 timed out, 2 error), u64 length, payload
//     ok payload: get -> value; add -> i64 new value; check -> u8 all present; set -> empty
//     error payload: the server's message
//   str and blob are u64 length + bytes.
// A `get` waits on the server (no polling): the server answers as soon as the key is set or when
// the request's timeout expires. Counters written by `add` are stored as decimal text.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail {

/// Runs the store server in a background thread (poll-based, any number of clients). `bind_host`
/// empty or "0.0.0.0" listens on every interface; port 0 picks a free port (see port()).
/// Throws BackendError naming the failing socket call when it cannot listen.
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& bind_host, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port the server listens on (the chosen one when constructed with port 0).
  int port() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Connects to the server at host:port, retrying until `timeout` (the server may start later).
/// The returned store is safe to use from several threads; a blocking `get` waits on the server
/// in slices so that other threads sharing the connection are not starved.
/// Throws TimeoutError when no connection could be made within `timeout`.
std::unique_ptr<Store> connect_tcp_store(const std::string& host, int port,
                                         std::chrono::milliseconds timeout);

}  // namespace mcr::detail
