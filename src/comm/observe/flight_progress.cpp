// Progress through the rendezvous store, for timeouts that name the ranks that are behind.
//
// Key "mcr/progress/<group id>/<group rank>" holds how many operations that rank has issued on
// that communicator, and how many of them were collectives ("<operations> <collectives>"): ranks
// meet in a collective by its index among the collectives, as send/recv shift sequence numbers. It
// is written by the watchdog thread every 250 ms, and only while an operation of that communicator
// has been outstanding for more than a second (then kept fresh while it changes; a write the store
// did not take is tried again, a second later where it did not answer), and by a rank that times
// out. A peer that is stuck waiting has
// therefore published by the time another rank's timeout reads the keys; a peer that never reached
// the operation has published a smaller count, or nothing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/log.hpp"
#include "mcr/errors.hpp"
#include "observe/flight_recorder.hpp"
#include "observe/flight_registry.hpp"
#include "runtime/runtime.hpp"

namespace mcr::detail {
namespace {

constexpr std::int64_t kStuckNs = 1'000'000'000;
constexpr std::int64_t kProbeBackoffNs = 1'000'000'000;  // after a probe the store did not answer
constexpr auto kReadTimeout = std::chrono::milliseconds(200);
constexpr auto kStoreProbe = std::chrono::milliseconds(1000);
constexpr auto kWatchdogProbe = std::chrono::milliseconds(200);
constexpr std::size_t kMaxNamed = 16;  // laggards listed by number; more are counted

std::string progress_key(std::uint64_t group_id, int group_rank) {
  return fmt::format("mcr/progress/{}/{}", group_id, group_rank);
}

Bytes progress_bytes(const FlightRecorder& r) {
  const FlightRecorder::Counts c = r.counts();
  return to_bytes(fmt::format("{} {}", c.issued, c.collectives));
}

struct Progress {
  std::uint64_t issued = 0;
  std::uint64_t collectives = 0;
};

Progress parse_progress(const Bytes& v) {
  const std::string text = from_bytes(v);
  Progress p;
  std::size_t used = 0;
  p.issued = std::stoull(text, &used);
  p.collectives = used < text.size() ? std::stoull(text.substr(used)) : p.issued;
  return p;
}

Store* store_or_null() noexcept {
  if (!runtime_exists()) return nullptr;
  Runtime& rt = runtime();
  return rt.bootstrap ? &rt.bootstrap->store() : nullptr;
}

// A skipped publication only matters if an operation then times out (its message says when the
// store did not answer), and under saturated links it can happen every second: the first is said,
// later ones only with MCR_DEBUG=1.
void note_unpublished(const char* why) noexcept {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    std::fprintf(
        stderr, "mcr: progress not published: %s (said once; MCR_DEBUG=1 shows every time)\n", why);
    return;
  }
  try {
    log_debug("progress not published: {}", why);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a debug line is not worth an exception here
  }
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool is_open(const FlightEntry* e) noexcept {
  if (e == nullptr) return false;
  const FlightState s = e->state.load(std::memory_order_relaxed);
  return s == FlightState::issued || s == FlightState::started;
}

// Since when the oldest operation still open on `r` has been open (0: none is). Timed per
// operation, not from the last operation issued: a rank that keeps issuing (sends, other
// asynchronous operations) while an earlier collective hangs is as stuck as one that waits, and
// its peers' timeouts must find its progress published.
std::int64_t oldest_open_since(FlightRecorder& r, std::int64_t now) noexcept {
  const std::uint64_t issued = r.issued_count();
  if (r.in_flight() <= 0) {
    r.watch_oldest = issued;
    r.watch_since_ns = 0;
    return 0;
  }
  if (r.watch_since_ns != 0) {
    if (r.watch_oldest == FlightRecorder::kWatchLost) return r.watch_since_ns;
    const FlightEntry* watched = r.find(r.watch_oldest);
    if (is_open(watched)) return r.watch_since_ns;
    if (watched == nullptr) {
      // Overwritten (more than capacity() operations since): whether it ended is not known, and
      // it may be the one that hangs. Kept, as open, until nothing is.
      r.watch_oldest = FlightRecorder::kWatchLost;
      return r.watch_since_ns;
    }
  }
  // The operation watched has ended, or none was: the next one still open, as far as the ring
  // holds it, timed from its issue (the coarse clock; `now` where that is not running).
  const std::uint64_t held = issued > r.capacity() ? issued - r.capacity() : 0;
  const std::uint64_t from =
      r.watch_oldest == FlightRecorder::kWatchLost ? held : std::max(r.watch_oldest, held);
  for (std::uint64_t seq = from; seq < issued; ++seq) {
    const FlightEntry* e = r.find(seq);
    if (!is_open(e)) continue;
    r.watch_oldest = seq;
    r.watch_since_ns = e->issued_ns > 0 && e->issued_ns < now ? e->issued_ns : now;
    return r.watch_since_ns;
  }
  // Open, but older than the ring: timed from now, until nothing is open.
  r.watch_oldest = FlightRecorder::kWatchLost;
  r.watch_since_ns = now;
  return now;
}

}  // namespace

void publish_stuck_progress() noexcept {
  Store* store = nullptr;
  try {
    store = store_or_null();
  } catch (...) {  // NOLINT(bugprone-empty-catch): no runtime, nothing to publish to
  }
  publish_stuck_progress(store, steady_ns());
}

void publish_stuck_progress(Store* store, std::int64_t now) noexcept {
  // After a store that did not answer, the next probe waits a second: each probe holds the store
  // client (and this watchdog thread) for up to its bound, which every period would make a steady
  // load on a link that is saturated already. A write that failed is retried at the next period.
  static std::atomic<std::int64_t> probe_after{0};
  if (now < probe_after.load(std::memory_order_relaxed)) return;
  // What each update replaces, so that a publication that fails is tried again at the next
  // period: a value marked published but never written would leave this rank unpublished for the
  // rest of the operation, and a peer's timeout would name it as not having reached it.
  struct Update {
    FlightRecorder* recorder;
    std::uint64_t before;
    std::uint64_t after;
    std::string key;
    Bytes value;
  };
  std::vector<Update> updates;
  {
    auto& reg = flight_registry();
    std::lock_guard lock(reg.mu);
    for (FlightRecorder* r : reg.live) {
      if (r->group_size() <= 1) continue;
      const std::uint64_t issued = r->issued_count();
      const std::int64_t since = oldest_open_since(*r, now);
      const bool stuck = since != 0 && now - since >= kStuckNs;
      if ((stuck || r->watch_published != 0) && issued != r->watch_published) {
        updates.push_back({r, r->watch_published, issued,
                           progress_key(r->group_id(), r->group_rank()), progress_bytes(*r)});
        r->watch_published = issued;
      }
    }
  }
  if (updates.empty()) return;
  std::size_t written = 0;
  // No store (no runtime yet, or any more): nothing to say, and tried again next time.
  if (store != nullptr) {
    try {
      // A store that does not answer (its host frozen or cut off) must not hold the store's lock
      // for a whole reply timeout: the timeout message of a rank's operation needs it next.
      if (!store->responds_within(kWatchdogProbe)) {
        probe_after.store(now + kProbeBackoffNs, std::memory_order_relaxed);
        throw Error(fmt::format("the rendezvous store did not answer within {} ms",
                                kWatchdogProbe.count()));
      }
      for (; written < updates.size(); ++written)
        store->set(updates[written].key, updates[written].value);
      return;
    } catch (const std::exception& e) {  // the store's host may be gone or busy
      note_unpublished(e.what());
    }
  }
  // Unmark what was not written. A recorder destroyed meanwhile is no longer live; one created at
  // its address starts unpublished (0), which no `after` equals (it counts an issued operation).
  auto& reg = flight_registry();
  std::lock_guard lock(reg.mu);
  for (std::size_t i = written; i < updates.size(); ++i) {
    const Update& u = updates[i];
    for (FlightRecorder* r : reg.live) {
      if (r == u.recorder && r->watch_published == u.after) r->watch_published = u.before;
    }
  }
}

std::string peers_context(const FlightRecorder& rec, std::uint64_t sequence, Store& store) {
  store.set(progress_key(rec.group_id(), rec.group_rank()), progress_bytes(rec));
  // Point-to-point involves one peer, and sequence numbers of a pair need not align: for
  // send/recv only the peer's progress is reported, not judged. A collective is judged by
  // its index among the collectives, which send/recv do not shift.
  const FlightEntry* e = rec.find(sequence);
  const bool p2p = e != nullptr && is_point_to_point(e->op);
  const std::uint64_t index = rec.collective_of(sequence);
  const std::uint64_t collective = index != FlightEntry::kNotCollective ? index : sequence;
  // An operation no longer in the ring (more than capacity() operations issued since, an
  // irecv posted long before, say) is of unknown kind and collective index once send/recv
  // have shifted the numbering: the peers' progress is reported, not judged (judged by its
  // sequence number, unrelated ranks were named, or none).
  const FlightRecorder::Counts counts = rec.counts();
  const bool unknown = e == nullptr && counts.collectives != counts.issued;
  // The peers named: the one peer (point-to-point), every other rank (unknown), or the ranks that
  // have not reached the collective (judged); `named` counts them past kMaxNamed too.
  std::string peers;
  std::size_t named = 0;
  for (int r = 0; r < rec.group_size(); ++r) {
    if (r == rec.group_rank() || (p2p && r != e->root)) continue;
    const std::string key = progress_key(rec.group_id(), r);
    std::string state = "no progress published";
    bool reached = false;
    if (store.check({key})) {
      const Progress peer = parse_progress(store.get(key, kReadTimeout));
      reached = peer.collectives > collective;
      state = peer.issued == 0 ? "issued nothing" : fmt::format("last issued #{}", peer.issued - 1);
      if (peer.collectives != peer.issued) {
        state +=
            fmt::format(", {} collective{}", peer.collectives, peer.collectives == 1 ? "" : "s");
      }
    }
    if (p2p) {
      peers = fmt::format("; peer rank {} (world rank {}) has {}", r, rec.world_rank_of(r), state);
      continue;
    }
    if (reached && !unknown) continue;
    if (named++ < kMaxNamed) {
      peers += fmt::format("{}{} (world rank {}, {})", peers.empty() ? "" : ", ", r,
                           rec.world_rank_of(r), state);
    }
  }
  if (named > kMaxNamed) peers += fmt::format(" and {} more", named - kMaxNamed);
  // Named by this rank's sequence number, with the collective's index where send/recv
  // made them differ.
  const std::string which = collective == sequence
                                ? fmt::format("sequence #{}", sequence)
                                : fmt::format(
                                      "sequence #{} (collective #{} of the group; sequence numbers "
                                      "count send/recv too)",
                                      sequence, collective);
  return unknown ? fmt::format(
                       "; sequence #{} is no longer in this rank's flight record ({} operations "
                       "issued since; MCR_FLIGHT_ENTRIES keeps {}), so which ranks reached it "
                       "is not known; the other ranks' progress: {}",
                       sequence, counts.issued - sequence - 1, rec.capacity(), peers)
         : p2p        ? peers
         : named == 0 ? fmt::format(
                            "; every other rank has reached {} (a peer may be stuck inside it or "
                            "issued a different operation)",
                            which)
                      : fmt::format("; ranks that have not reached {}: {}", which, peers);
}

std::string timeout_context(const FlightRecorder& rec, std::uint64_t sequence) noexcept {
  try {
    const FlightConfig& c = flight_config();
    std::string out = fmt::format(
        "; rank {} of group {} ({} ranks; world rank {}, host {}, pid {})", rec.group_rank(),
        rec.group_id(), rec.group_size(), rec.world_rank_of(rec.group_rank()), c.host, c.pid);
    if (rec.group_size() > 1) {
      try {
        Store* store = store_or_null();
        if (store == nullptr) throw Error("no rendezvous store");
        // The store's host may be the one that is cut off: ask briefly before the queries below,
        // each of which would otherwise wait the store's full reply timeout.
        if (!store->responds_within(kStoreProbe)) {
          throw Error(
              fmt::format("the rendezvous store did not answer within {} ms", kStoreProbe.count()));
        }
        out += peers_context(rec, sequence, *store);
      } catch (const std::exception& e) {
        out += fmt::format("; peers' progress unavailable: {}", e.what());
      }
    }
    const std::string dumped = dump_flight_record_to_dir(
        fmt::format("timeout of sequence #{} in group {}", sequence, rec.group_id()));
    if (!dumped.empty()) out += fmt::format("; flight record: {}", dumped);
    return out;
  } catch (const std::exception& e) {
    return fmt::format("; (rank context unavailable: {})", e.what());
  }
}

}  // namespace mcr::detail
