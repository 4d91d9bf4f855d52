// The TCP store's wire format: little-endian integers and length-prefixed blobs. A request is
// <u32 body length><body>, the body starting with a Command; a reply is <Status><blob>. Shared by
// the server (tcp_store_server.cpp) and the client (tcp_store_client.cpp). The first request of
// every connection must be a hello (tcp_store.hpp); docs/reliability.md explains the caps below.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "bootstrap/bootstrap.hpp"

namespace mcr::detail::store_wire {

using Clock = std::chrono::steady_clock;

enum class Command : std::uint8_t { set = 1, get = 2, add = 3, check = 4, hello = 5 };
enum class Status : std::uint8_t { ok = 0, timed_out = 1, error = 2 };

// Bumped whenever a request or reply changes shape; a hello with another version is refused.
inline constexpr std::uint32_t kProtocolVersion = 2;

// Keys are short names ("gloo/world/12", "mcr/split/0/3/17") plus the job prefix.
inline constexpr std::size_t kMaxKeyBytes = 4096;
// The largest value any rank stores is a Gloo address list or a world all-gather entry: a few
// hundred bytes per rank, so 64 MiB leaves room for far more ranks than a job has, while bounding
// what one request can make rank 0 allocate.
inline constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;
// A request body: command, key and value with their length fields; anything longer is not ours
// and closes the connection before a byte of it is buffered.
inline constexpr std::uint32_t kMaxBodyBytes =
    static_cast<std::uint32_t>(kMaxValueBytes + kMaxKeyBytes + 64);
// Until a connection has presented the job's token it may send only a hello, and no more than
// this: a stranger costs rank 0 a few KiB per connection, never a large buffer.
inline constexpr std::uint32_t kMaxHelloBytes = 4096;
// Replies queued for a client that does not read them; past this the connection is closed.
inline constexpr std::size_t kMaxQueuedReplyBytes = 2 * kMaxValueBytes + (std::size_t{1} << 20);
// Everything authenticated ranks store together (keys and values).
inline constexpr std::size_t kMaxStoredBytes = std::size_t{1} << 30;
// Connections that have not yet completed the hello, at once; further ones are closed on accept.
inline constexpr std::size_t kMaxPendingConnections = 64;
// A connection that has not sent its hello within this long is closed (a real client sends it
// right after connecting).
inline constexpr std::chrono::seconds kHelloDeadline{10};
// A waiting get is served in slices of at most this long, so a client connection shared by
// several threads is never held by one of them for long.
inline constexpr std::chrono::milliseconds kGetSlice{100};

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
  /// Whether every byte has been read: a message with bytes left over is malformed too.
  bool at_end() const noexcept { return p_ == end_; }

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

inline Bytes encode_reply(Status status, const void* payload, std::size_t n) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(status));
  w.blob(payload, n);
  return std::move(w.bytes());
}
inline Bytes encode_reply(Status status, std::string_view payload = {}) {
  return encode_reply(status, payload.data(), payload.size());
}

}  // namespace mcr::detail::store_wire
