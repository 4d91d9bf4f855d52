// The TCP store's wire format: little-endian integers and length-prefixed blobs. A request is
// <u32 body length><body>, the body starting with a Command; a reply is <Status><blob>. Shared by
// the server (tcp_store_server.cpp) and the client (tcp_store_client.cpp).
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

enum class Command : std::uint8_t { set = 1, get = 2, add = 3, check = 4 };
enum class Status : std::uint8_t { ok = 0, timed_out = 1, error = 2 };

// A request body larger than this is a protocol error (garbage on the port), not a real value.
inline constexpr std::uint32_t kMaxBodyBytes = 1u << 30;
// A waiting get is served in slices of at most this long, so a client connection shared by
// several threads is never held by one of them for long.
inline constexpr std::chrono::milliseconds kGetSlice{100};
// A reply slower than this means the server is gone (it answers every request within a slice).
inline constexpr int kReplyTimeoutSeconds = 60;

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
