// Cross-rank verification: before a collective starts, the ranks of the communicator exchange a
// compact descriptor of it (op, dtype, count, root, reduce op, backend, sync/async form, place,
// collective index) and every rank raises MismatchError naming the field and the ranks that differ,
// instead of a wrong result, a crash or a hang. By default only the first call of each distinct
// signature is verified, on every communicator; MCR_VERIFY=1 verifies every collective,
// MCR_VERIFY=0 none. See docs/reliability.md, "Cross-rank verification".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "core/backend.hpp"
#include "mcr/comm/communicator.hpp"

namespace mcr::detail {

class CommState;

/// How much a communicator verifies.
enum class VerifyMode : std::uint8_t {
  off,    ///< nothing (MCR_VERIFY=0)
  first,  ///< the first call of each distinct signature (the default)
  every,  ///< every collective (MCR_VERIFY=1, InitOptions::verify)
};
std::string_view to_string(VerifyMode m) noexcept;

/// The mode init() uses: `every` when InitOptions::verify is set, else MCR_VERIFY ("1" every, "0"
/// off, "first" or unset first; anything else is an InvalidArgument naming the value).
VerifyMode verify_mode_requested(const InitOptions& options);

/// The v-ops' count tables of every rank (rank r's: its send counts, then its receive counts;
/// all_gather_v's: every rank's block count, then zeros) compared: "" when they agree,
/// else what differs. all_gather_v's must be identical everywhere; in all_to_all_v what rank i
/// sends to j must be what j expects from i.
std::string compare_v_counts(OpType op, const std::vector<std::vector<std::uint64_t>>& all);

/// The verification channel of one communicator: a backend instance of its own (a duplicated MPI
/// communicator when MPI is usable, else a Gloo context of its own), so that the exchange never
/// queues behind, or matches against, the communicator's operations.
class Verifier {
 public:
  /// Collective over `state`'s members: splits the first backend that can all-gather host bytes.
  Verifier(CommState& state, VerifyMode mode);
  ~Verifier();
  Verifier(const Verifier&) = delete;
  Verifier& operator=(const Verifier&) = delete;

  /// Rank-local pause/resume (Communicator::set_verify). Collectives issued while paused are still
  /// counted, so a rank that issued one its peers did not shows as "collective index differs".
  void set_enabled(bool on) noexcept { enabled_ = on; }
  bool enabled() const noexcept { return enabled_; }

  /// Whether `args` goes without an exchange: point-to-point operations, every call while paused,
  /// and in `first` mode a signature every rank has already verified. Counts the collective when
  /// it does. Cheap: a hash and a probe of a small table, no allocation.
  bool skips(const OpArgs& args) noexcept;

  /// Selects the backend of `args` with `pick` and, for a collective while enabled, exchanges its
  /// descriptor with every rank before returning it. Raises MismatchError on every rank when they
  /// disagree (nothing was started: the communicator stays usable); TimeoutError when a rank does
  /// not reach the exchange in time (the communicator is then aborted). A selection error that
  /// every rank shares is rethrown after the exchange.
  Backend& pick(CommState& state, const OpArgs& args, const CallOptions& opts,
                const std::function<Backend&()>& pick);

 private:
  /// Signatures verified so far (`first` mode): open addressing over 64-bit hashes, 0 = empty.
  /// Every rank inserts the same signatures at the same calls (after an exchange they all made),
  /// so the table, and what it skips, are equal on every rank of a program that calls alike.
  static constexpr std::size_t kSeenSlots = 1024;
  bool seen(std::uint64_t signature) const noexcept;
  void remember(std::uint64_t signature) noexcept;

  std::unique_ptr<Backend> channel_;
  std::uint64_t collectives_ = 0;  // collectives issued on this communicator, verified or not
  std::uint64_t exchanges_ = 0;    // exchanges made on the channel (its own sequence)
  bool enabled_ = true;
  VerifyMode mode_ = VerifyMode::every;
  std::size_t seen_count_ = 0;
  std::unique_ptr<std::uint64_t[]> seen_;  // kSeenSlots entries, `first` mode only
};

}  // namespace mcr::detail
