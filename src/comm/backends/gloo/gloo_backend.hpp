// The Gloo backend: every operation on CPU tensors over gloo's TCP transport, with rendezvous
// through our Store. Collectives start in issue order on a few worker threads per instance (inline
// in the caller's thread for a synchronous call when nothing is queued); point-to-point operations
// are posted at once. See docs/gloo-backend.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/gloo/gloo_p2p.hpp"
#include "backends/gloo/gloo_worker.hpp"
#include "bootstrap/bootstrap.hpp"
#include "core/backend.hpp"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace mcr::detail {

/// What every group of one job shares: the store for rendezvous and the transport device.
struct GlooShared {
  Store* store = nullptr;  ///< owned by the Bootstrap, which outlives every backend
  std::shared_ptr<gloo::transport::Device> device;
  std::string hostname;               ///< the address peers connect to
  std::chrono::milliseconds timeout;  ///< rendezvous and default per-operation timeout
  /// The caller runs its blocking collectives itself and sleeps while it waits for gloo, as
  /// gloo's own calls do (else the worker runs every collective and the caller polls). See
  /// gloo_runs_inline().
  bool run_inline = true;
  /// How many collectives of one instance may run at once (gloo_collective_threads()).
  int collective_threads = 2;
};

/// MCR_GLOO_INLINE=0 turns run_inline off; unset or 1 leaves it on. Polling wins only now and
/// then, on a host whose cores other processes keep busy, and costs a core per waiting rank
/// (docs/performance/bench-and-tuning.md#gloo-vs-raw-gloo and
/// docs/performance/bench-and-tuning.md#gloo-sleeping-waits). Throws InvalidArgument naming
/// MCR_GLOO_INLINE for other values.
bool gloo_runs_inline();

/// MCR_GLOO_THREADS: how many asynchronous collectives of one communicator run side by side on
/// its Gloo context, each on its own worker thread (1-64; default 2, as torch's ProcessGroupGloo).
/// With one, a collective between hosts leaves the link idle while its own reductions and
/// hand-offs run (docs/performance/bench-and-tuning.md#gloo-collective-threads). Throws
/// InvalidArgument naming MCR_GLOO_THREADS for other values.
int gloo_collective_threads();

/// Checks every MCR_GLOO_* input that can be checked before the bootstrap (MCR_GLOO_INLINE,
/// MCR_GLOO_THREADS, MCR_GLOO_IFACE naming an interface of this host); throws InvalidArgument
/// naming the variable. The factory's check_config.
void check_gloo_config();

/// The hostname gloo's device binds and advertises: MCR_GLOO_HOSTNAME when set; else the IPv4
/// address of interface MCR_GLOO_IFACE when set; else 127.0.0.1 when every rank runs on this host
/// (launch.single_host, from the bootstrap's host identities);
/// else the local address of the route to the store host (MCR_STORE_HOST, or MASTER_ADDR under
/// torchrun) when known; else gethostname() when it resolves to a non-loopback address; else the
/// first non-loopback interface's address.
std::string gloo_hostname(const LaunchInfo& launch);

class GlooBackend final : public Backend {
 public:
  /// Creates the world instance (collective over the bootstrap's world).
  static std::unique_ptr<Backend> create_world(Bootstrap& bootstrap);

  GlooBackend(std::shared_ptr<GlooShared> shared, std::shared_ptr<gloo::Context> context);
  ~GlooBackend() override;

  std::string_view name() const noexcept override { return "gloo"; }
  bool reports_peer_loss() const noexcept override { return true; }
  int rank() const noexcept override;
  int size() const noexcept override;
  Support supports(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) const override;
  std::unique_ptr<PendingOp> start(const OpArgs& args) override;
  /// Closes every connection of this context: this rank's blocked operations fail at once, and so
  /// do its peers' (they read "connection closed by peer").
  void abort() noexcept override;
  std::unique_ptr<Backend> split(const std::vector<int>& members, std::uint64_t group_id) override;
  /// The same as split(): a Gloo rendezvous involves the new group's members only.
  std::unique_ptr<Backend> split_members(const std::vector<int>& members,
                                         std::uint64_t group_id) override {
    return split(members, group_id);
  }

 private:
  std::shared_ptr<GlooShared> shared_;
  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<GlooSelfMailbox> self_ = std::make_shared<GlooSelfMailbox>();
  std::uint32_t next_tag_ = 0;  // consecutive per collective: equal on every rank
  // Declared last: destroyed first, so no thread touches the members above after they are gone.
  std::shared_ptr<GlooWaiterPool> waiters_ = std::make_shared<GlooWaiterPool>();
  std::shared_ptr<GlooWorker> worker_;
};

}  // namespace mcr::detail
