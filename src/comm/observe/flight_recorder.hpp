// Flight recorder: each communicator keeps its last N operations (MCR_FLIGHT_ENTRIES, default 256)
// in a fixed ring of plain records, so that after a timeout, an abort or a crash every rank can say
// what it issued, started and completed. Recording is a few plain stores into a slot chosen by the
// sequence number: no allocation, no lock and no atomic read-modify-write per operation.
//
// Dumps (one JSON file per rank, docs/reliability.md "Flight recorder and `mcr doctor`") are
// written into MCR_FLIGHT_DIR on timeout, on a fatal signal, on std::terminate, on exit without
// finalize(), on SIGUSR1 (by the watchdog thread) and on demand (mcr::dump_flight_record()).
//
// Progress publication: while an operation has been outstanding for more than a second, the
// watchdog thread publishes the communicator's issued counts (operations, collectives) to the
// rendezvous store, so that a
// rank that times out can name the peers that never reached its operation. The hot path never
// touches the store.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "mcr/comm/types.hpp"

namespace mcr::detail {

class Store;

enum class FlightState : std::uint8_t { issued, started, completed, failed, timed_out };
std::string_view to_string(FlightState s) noexcept;

/// Coarse steady-clock time in nanoseconds, advanced by the watchdog thread every 50 ms: the
/// recorder stamps operations with one relaxed load instead of a clock read. The recorder is for
/// hangs (seconds); exact per-operation times are the communication log's job (MCR_LOG).
inline std::atomic<std::int64_t> g_flight_clock_ns{0};
void advance_flight_clock() noexcept;

/// One operation. Plain fields; only the state is atomic, as it is the one field a reader from
/// another thread must not see torn while its operation is in flight.
struct FlightEntry {
  static constexpr std::uint64_t kNotCollective = ~std::uint64_t{0};
  std::uint64_t sequence = ~std::uint64_t{0};  // ~0: the slot was never used
  std::int64_t issued_ns = 0;                  // g_flight_clock_ns at issue
  std::int64_t ended_ns = 0;                   // 0 until completed, failed or timed out
  std::size_t count = 0;
  std::size_t bytes = 0;
  std::string_view backend;  // static storage (Backend::name())
  int root = 0;              // OpArgs::root; shown for rooted collectives and send/recv
  OpType op = OpType::barrier;
  DType dtype = DType::u8;
  std::atomic<FlightState> state{FlightState::issued};  // read by other threads (relaxed)
  bool async = false;
};

/// The ring of one communicator. Written by the thread issuing and completing its operations;
/// read, best effort, by dumps from other threads or signal handlers. Inline: it is on the
/// per-operation path (docs/performance/dispatch.md#flight-recorder-cost counts its instructions).
class FlightRecorder {
 public:
  FlightRecorder();
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// Identifies the communicator in dumps and store keys (called once it is known), and makes it
  /// live: dumps and the progress publication see it from then on.
  void attach(std::uint64_t group_id, int group_rank, int group_size,
              const std::vector<int>& world_ranks);

  void issued(std::uint64_t sequence, OpType op, DType dtype, std::size_t count, int root,
              bool async, std::string_view backend, std::size_t bytes) noexcept {
    FlightEntry& e = ring_[sequence & mask_];
    e.sequence = sequence;
    e.issued_ns = g_flight_clock_ns.load(std::memory_order_relaxed);
    e.ended_ns = 0;
    e.count = count;
    e.bytes = bytes;
    e.backend = backend;
    e.root = root;
    e.op = op;
    e.dtype = dtype;
    e.async = async;
    e.state.store(FlightState::issued, std::memory_order_relaxed);
    // One writer: loads and stores, no read-modify-write. The send/recv count is counted for
    // collective indices; only send/recv pay for it (a sequence number recorded again, verified
    // first and then issued, is a collective). It is stored before issued_, which releases it: a
    // reader that sees the new issued_ sees the new count (counts()). In the other order, a
    // reader between the two saw one collective too many, and kept it while the rank blocked in
    // that send (a published progress is refreshed only when issued_ changes).
    // The operations in flight likewise: a reader that sees the new issued_ and no operation in
    // flight took every operation up to it for ended, and never timed this one.
    if (is_point_to_point(op)) {
      p2p_.store(p2p_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    issued_.store(sequence + 1, std::memory_order_release);
  }
  void started(std::uint64_t sequence) noexcept {
    FlightEntry& e = ring_[sequence & mask_];
    if (e.sequence == sequence) e.state.store(FlightState::started, std::memory_order_relaxed);
  }
  /// The collective last recorded passed cross-rank verification: it stays in the record as
  /// issued (the rank has reached it) but is no longer counted in flight, until the issue that
  /// follows records it again, with its backend, and counts it. (Ended as completed here, a dump
  /// while the issue waited at the device fence said this rank had completed it.)
  void verified() noexcept {
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  /// An operation given up between its verification and its issue (a wait before it starts
  /// failed): ended as failed where verification left it open; nothing where it was not verified.
  void failed_before_issue(std::uint64_t sequence) noexcept {
    FlightEntry& e = ring_[sequence & mask_];
    if (e.sequence != sequence || e.state.load(std::memory_order_relaxed) != FlightState::issued ||
        issued_count() != sequence + 1) {
      return;
    }
    e.ended_ns = g_flight_clock_ns.load(std::memory_order_relaxed);
    e.state.store(FlightState::failed, std::memory_order_relaxed);
  }
  /// A terminal state: completed, failed or timed_out.
  void ended(std::uint64_t sequence, FlightState s) noexcept {
    in_flight_.store(in_flight_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    FlightEntry& e = ring_[sequence & mask_];
    if (e.sequence != sequence) return;  // overwritten: more than capacity() operations since
    e.ended_ns = g_flight_clock_ns.load(std::memory_order_relaxed);
    e.state.store(s, std::memory_order_relaxed);
  }

  std::uint64_t group_id() const noexcept { return group_id_; }
  int group_rank() const noexcept { return group_rank_; }
  int group_size() const noexcept { return group_size_; }
  int world_rank_of(int group_rank) const noexcept;
  /// Operations issued so far (the next sequence number).
  std::uint64_t issued_count() const noexcept { return issued_.load(std::memory_order_acquire); }
  struct Counts {
    std::uint64_t issued = 0;       ///< operations (the next sequence number)
    std::uint64_t collectives = 0;  ///< collectives (the next collective index, collective_of())
  };
  /// Both counts, read as one: never a collective over. A reader delayed between its two loads
  /// reads the collectives short by the sends issued meanwhile; a later read sees them in both.
  Counts counts() const noexcept {
    const std::uint64_t issued = issued_count();
    const std::uint64_t p2p = p2p_.load(std::memory_order_relaxed);
    return {issued, issued >= p2p ? issued - p2p : 0};
  }
  /// The index among this communicator's collectives of the collective at `sequence` (in the
  /// ring), or FlightEntry::kNotCollective for send/recv. Sequence numbers count send/recv too,
  /// which involve one peer: after two sends on rank 0 alone, rank 0's sequence #3 is rank 1's #1.
  /// Ranks meet in a collective by this index. Reads the ring (a dump's or a timeout's cost,
  /// never the hot path's).
  std::uint64_t collective_of(std::uint64_t sequence) const noexcept;
  std::int64_t in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  std::size_t capacity() const noexcept { return mask_ + 1; }
  /// The entry of `sequence`, or nullptr when the ring no longer holds it.
  const FlightEntry* find(std::uint64_t sequence) const noexcept {
    const FlightEntry& e = ring_[sequence & mask_];
    return e.sequence == sequence ? &e : nullptr;
  }
  /// This communicator's part of a dump.
  nlohmann::json to_json(std::int64_t now_ns, std::int64_t wall_minus_steady) const;

  // Progress publication state, touched by the watchdog thread only.
  static constexpr std::uint64_t kWatchLost = ~std::uint64_t{0};
  std::uint64_t watch_oldest = 0;     // the oldest operation still open, as last seen; kWatchLost:
                                      // open, but no longer in the ring
  std::int64_t watch_since_ns = 0;    // since when it has been open; 0: nothing open
  std::uint64_t watch_published = 0;  // 0: never published

 private:
  std::unique_ptr<FlightEntry[]> ring_;
  std::uint64_t mask_;  // capacity - 1; the capacity is a power of two
  std::atomic<std::uint64_t> issued_{0};
  std::atomic<std::uint64_t> p2p_{0};  // send/recv issued
  std::atomic<std::int64_t> in_flight_{0};
  std::uint64_t group_id_ = 0;
  int group_rank_ = 0;
  int group_size_ = 1;
  std::vector<int> world_ranks_;
};

/// Writes this process's dump (every live communicator) into MCR_FLIGHT_DIR, when it is set;
/// `reason` says why ("timeout: ...", "signal SIGTERM"). Returns the path written, or "" when no
/// directory is configured or writing failed (reported on standard error). Never throws.
/// What a dump is for: a failure's record (a timeout, a crash, the watchdog) is the one that
/// explains it and keeps the record file; a snapshot (SIGUSR1, on demand, on a live job) gives the
/// record file up to a later failure's record.
enum class DumpKind { failure, snapshot };
std::string dump_flight_record_to_dir(std::string_view reason,
                                      DumpKind kind = DumpKind::failure) noexcept;

/// The watchdog's duty every 250 ms: publishes the progress of every communicator with an
/// operation outstanding for more than a second, and refreshes values published before. A
/// publication the store did not take is tried again at the next call (a second later where the
/// store did not answer its probe).
void publish_stuck_progress() noexcept;
/// The same, to `store` (nullptr: none, which counts as a failed publication), at steady-clock
/// time `now_ns`.
void publish_stuck_progress(Store* store, std::int64_t now_ns) noexcept;

/// Context for a timeout of `sequence` on `rec`: names this rank (group and world) and, from the
/// peers' published progress, the group members that have not reached `sequence`. Publishes this
/// rank's own progress first and writes the flight dump. Never throws; bounded to a few store
/// round trips per member.
std::string timeout_context(const FlightRecorder& rec, std::uint64_t sequence) noexcept;

/// timeout_context()'s judgement of the peers, from their progress in `store` (publishing this
/// rank's first): the ranks that have not reached `sequence`, the peer of a send/recv, or, for an
/// operation no longer in the ring, every peer's progress unjudged. Throws on a store error.
std::string peers_context(const FlightRecorder& rec, std::uint64_t sequence, Store& store);

/// Set by the SIGUSR1 handler; the watchdog thread dumps when it sees it.
bool take_dump_request() noexcept;

/// Installs the crash hooks (fatal signals, SIGUSR1, std::terminate, exit without finalize) once,
/// when MCR_FLIGHT_DIR is set. Called by init() through the watchdog start.
void install_flight_hooks();

/// Writes the crash reports once per process: the flight dump and this rank's MCR_LOG output.
void write_crash_reports(std::string_view reason) noexcept;

}  // namespace mcr::detail
