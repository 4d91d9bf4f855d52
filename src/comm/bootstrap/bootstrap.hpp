// How the ranks of a job find each other: launcher detection, a world-level exchange, and a
// key-value store for backend rendezvous (Gloo pair addresses, NCCL unique ids, group formation).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/launch.hpp"
#include "mcr/comm/store.hpp"

namespace mcr::detail {

using Bytes = KeyValueStore::Bytes;

/// Text as store/exchange bytes, and back.
inline Bytes to_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}
inline std::string from_bytes(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

using mcr::Launcher;
using mcr::to_string;

/// The launcher's placement (mcr::launch_info) and what the store setup adds once ranks have
/// compared notes (bootstrap/host.hpp).
struct LaunchInfo : mcr::LaunchInfo {
  std::string host_id;            ///< this process's host identity (host name, boot id, network ns)
  bool single_host = false;       ///< every rank of the world has this host identity
  std::vector<int> host_of_rank;  ///< world rank -> host index (topology.hpp), rank 0's host is 0
};

/// Slurm's tasks-per-node list ("4", "2(x3),1") at node index `node`; -1 when malformed or short.
int slurm_tasks_on_node(std::string_view per_node, int node);
/// The first host of a Slurm host list ("node[01-04],gpu5" -> "node01"); empty when malformed.
std::string slurm_first_host(std::string_view list);
/// The store port of an srun step without PMI when neither MASTER_PORT nor reserved ports are set.
int slurm_default_port(std::int64_t job_id, std::int64_t step_id);

/// The store every part of the runtime talks to: the public contract (mcr/comm/store.hpp) plus a
/// probe for diagnostics. Two kinds exist: the client of mcr's own TCP store (tcp_store.hpp), and
/// an adapter over a store the application handed to init() (given_store.hpp).
class Store : public KeyValueStore {
 public:
  /// Whether the store answers a request within `bound` (much shorter than the store's own reply
  /// timeout): diagnostics written while a peer or a link may be gone ask this first, so that an
  /// unreachable store costs them `bound`, not another full timeout.
  virtual bool responds_within(std::chrono::milliseconds bound) {
    (void)bound;
    return true;
  }
};

/// Collective byte exchange among all ranks of the world (MPI_Allgatherv, or through the store).
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual std::vector<Bytes> all_gather(const Bytes& mine) = 0;
};

/// Everything the backends need to rendezvous.
class Bootstrap {
 public:
  Bootstrap(LaunchInfo launch, std::unique_ptr<Exchange> exchange, std::unique_ptr<Store> store,
            std::chrono::milliseconds timeout)
      : launch_(std::move(launch)),
        exchange_(std::move(exchange)),
        store_(std::move(store)),
        timeout_(timeout) {}

  const LaunchInfo& launch() const noexcept { return launch_; }
  int rank() const noexcept { return launch_.rank; }
  int size() const noexcept { return launch_.size; }
  /// This process's host identity: equal for two ranks exactly when they share a machine and a
  /// network namespace (so loopback reaches one from the other).
  const std::string& host_id() const noexcept { return launch_.host_id; }
  /// Whether every rank of the world has this process's host identity.
  bool single_host() const noexcept { return launch_.single_host; }
  /// World rank -> host index: ranks with equal indices share a host identity.
  const std::vector<int>& host_of_rank() const noexcept { return launch_.host_of_rank; }
  Exchange& exchange() { return *exchange_; }
  Store& store() { return *store_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  LaunchInfo launch_;
  std::unique_ptr<Exchange> exchange_;
  std::unique_ptr<Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace mcr::detail
