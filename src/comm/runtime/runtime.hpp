// The process-wide runtime that init() creates: bootstrap, selection inputs, the world
// communicator.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/tcp_store.hpp"
#include "core/state.hpp"
#include "mcr/comm/selection.hpp"
#include "observe/verify.hpp"

namespace mcr::detail {

/// A composed backend of the build (hier), as init() configured it.
struct ComposedChoice {
  const ComposedBackendFactory* factory = nullptr;
  std::string config;  // its canonical configuration (ComposedBackendFactory::read_config)
  bool wanted = true;  // MCR_BACKENDS / InitOptions::backends left it in (or is unset)
};

struct Runtime {
  LaunchInfo launch;
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 only, never with a given store
  bool store_given = false;    // InitOptions::store: the application's store, not mcr's
  std::string rendezvous;      // the store's description: "tcp store", or the given store's
  std::string world_exchange;  // "mpi" or "store"
  std::string store_host;      // where rank 0's TCP store listens; empty with a given store
  std::unique_ptr<Bootstrap> bootstrap;
  std::shared_ptr<const RuleSet> rules;
  std::shared_ptr<const TuningTable> table;
  std::string rules_source;  // where the rules came from, for `mcr info`
  std::string table_source;
  std::vector<std::pair<std::string, std::string>> unusable;  // compiled in, not usable here
  VerifyMode verify = VerifyMode::first;  // MCR_VERIFY / InitOptions::verify (verify.hpp)
  std::vector<ComposedChoice> composed;   // one per composed backend of the build
  std::shared_ptr<CommState> world;
};

/// The runtime; throws mcr::Error when init() has not run.
Runtime& runtime();
/// The runtime of an init() that completed: throws Error, saying so, when init() failed after the
/// runtime was formed (then only finalize() applies).
Runtime& initialized_runtime();
bool runtime_exists() noexcept;

/// Creates the state of a communicator over `backends`, checking across its members that they
/// loaded the same rules, tuning table and backend set (throws MismatchError naming the ranks).
std::shared_ptr<CommState> make_comm_state(int rank, int size, std::uint64_t id,
                                           std::vector<int> world_ranks,
                                           std::vector<std::unique_ptr<Backend>> backends,
                                           std::chrono::milliseconds timeout);

}  // namespace mcr::detail
