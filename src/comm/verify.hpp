// Cross-rank verification (MCR_VERIFY=1, InitOptions::verify): before a collective starts, the
// ranks of the communicator exchange a compact descriptor of it (op, dtype, count, root, reduce op,
// backend, sync/async form, collective index) and every rank raises MismatchError naming the field
// and the ranks that differ, instead of a wrong result, a crash or a hang. See docs/reliability.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "backend.hpp"
#include "mcr/communicator.hpp"

namespace mcr::detail {

class CommState;

/// Whether init() turns verification on: `InitOptions::verify`, else MCR_VERIFY ("1" on, "0" or
/// unset off; anything else is an InvalidArgument naming the value).
bool verify_requested(const InitOptions& options);

/// The verification channel of one communicator: a backend instance of its own (a duplicated MPI
/// communicator when MPI is usable, else a Gloo context of its own), so that the exchange never
/// queues behind, or matches against, the communicator's operations.
class Verifier {
 public:
  /// Collective over `state`'s members: splits the first backend that can all-gather host bytes.
  explicit Verifier(CommState& state);
  ~Verifier();
  Verifier(const Verifier&) = delete;
  Verifier& operator=(const Verifier&) = delete;

  /// Rank-local pause/resume (Communicator::set_verify). Collectives issued while paused are still
  /// counted, so a rank that issued one its peers did not shows as "collective index differs".
  void set_enabled(bool on) noexcept { enabled_ = on; }
  bool enabled() const noexcept { return enabled_; }

  /// Selects the backend of `args` with `pick` and, for a collective while enabled, exchanges its
  /// descriptor with every rank before returning it. Raises MismatchError on every rank when they
  /// disagree (nothing was started: the communicator stays usable); TimeoutError when a rank does
  /// not reach the exchange in time (the communicator is then aborted). A selection error that
  /// every rank shares is rethrown after the exchange.
  Backend& pick(CommState& state, const OpArgs& args, const CallOptions& opts,
                const std::function<Backend&()>& pick);

 private:
  std::unique_ptr<Backend> channel_;
  std::uint64_t collectives_ = 0;  // collectives issued on this communicator, verified or not
  std::uint64_t exchanges_ = 0;    // exchanges made on the channel (its own sequence)
  bool enabled_ = true;
};

}  // namespace mcr::detail
