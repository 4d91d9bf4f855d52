// The rendezvous hook of init(): a key-value store the application already shares among the ranks
// of its job (for example torch.distributed's c10d store), which mcr then uses instead of starting
// its own TCP store (docs/design.md, "Bootstrap").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mcr {

/// A blocking key-value store shared by every rank of the job. init() calls it from the thread
/// that calls init(), and later from the thread that issues mcr calls and from mcr's watchdog
/// thread, so an implementation must be safe to use from several threads at once.
///
/// mcr writes only keys that start with "mcr/", so a store the application uses for its own keys
/// can be handed over as it is. Values are opaque bytes, except those written by add().
class KeyValueStore {
 public:
  using Bytes = std::vector<std::uint8_t>;

  virtual ~KeyValueStore() = default;

  /// Stores `value` under `key`, replacing any earlier value.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /// The value under `key`, waiting until some rank has set it, at most `timeout` (zero or less:
  /// do not wait). Throws mcr::TimeoutError naming the key when it does not appear in time.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Atomically adds `delta` to the integer stored at `key` (0 when absent) and returns the new
  /// value; the value is kept as decimal text, as c10d stores keep it.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Whether every key in `keys` exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// How the runtime reports this store (mcr::RuntimeInfo::rendezvous, messages).
  virtual std::string description() const { return "InitOptions::store"; }
};

}  // namespace mcr
