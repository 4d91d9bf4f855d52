// Introspection for `mcr info`: version, build options, backends and their capability tables.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "mcr/comm/communicator.hpp"
#include "mcr/comm/types.hpp"

namespace mcr {

struct Capability {
  OpType op = OpType::barrier;
  DType dtype = DType::f32;
  ReduceOp reduce = ReduceOp::sum;  ///< meaningful for reductions only
  Device::Kind device = Device::Kind::cpu;
  bool supported = false;
  std::string detail;  ///< how (native, staged, ...) when supported, else why not
};

struct BackendInfo {
  std::string name;
  std::string library;  ///< the library and its version ("Open MPI v4.1.4", "NCCL 2.28.3")
  bool usable = false;
  std::string reason;                    ///< why it is unusable, when it is
  std::vector<Capability> capabilities;  ///< empty when unusable
};

struct RuntimeInfo {
  std::string version;
  std::map<std::string, std::string>
      build;  ///< build options: type, compiler, backends compiled in
  std::string launcher;
  /// How the world was formed: "tcp store" (mcr's own, on rank 0) or the description of the store
  /// given in InitOptions::store ("InitOptions::store", "torch store", ...).
  std::string rendezvous;
  std::string world_exchange;  ///< "mpi" (MPI formed the world) or "store"
  /// The address of rank 0's TCP store, which every rank reached ("127.0.0.1" when all ranks share
  /// a host); empty when a given store was used.
  std::string store_host;
  int rank = 0;
  int size = 1;
  std::vector<BackendInfo> backends;  ///< every backend compiled in, in default priority order
  std::string rules;                  ///< resolved rules, canonical form
  std::string rules_source;
  std::string tuning_source;  ///< tuning table path, or empty
  std::chrono::milliseconds timeout{0};
};

/// Every backend name mcr has ("nccl", "mpi", "gloo"), whether this build compiled it or not: rules
/// and tuning tables made on another machine may name one this build lacks. Needs no init().
const std::vector<std::string>& backend_names();

/// Version string of this build, e.g. "0.1.0".
std::string version();
/// Everything `mcr info` shows, for the world communicator of an initialised runtime.
RuntimeInfo runtime_info();

/// Which backend the loaded rules and tuning table pick for an operation on a communicator of
/// `ranks` ranks (the world's backends; `ranks` need not be the world size), with every candidate's
/// reason. At the world's size the world's hosts x ranks per host decide which tuning entries fit;
/// at another size the placement is unknown and only entries that name no topology fit
/// (Communicator::explain answers for a real communicator). `form`: the blocking call or its i*
/// counterpart. Requires init().
Selection explain_selection(OpType op, DType dtype, std::size_t bytes, int ranks,
                            ReduceOp reduce = ReduceOp::sum, Device device = Device::cpu(),
                            CallForm form = CallForm::sync);

/// The steps the composed backend `hier` runs for `op` of `bytes` (the nccl-tests size) with
/// `ranks_per_host` ranks on each host, in issue order, without a backend: empty for an op it
/// does not compose. What `mcr tune` measures on the per-host and across-host groups.
std::vector<HierStep> hier_steps(OpType op, DType dtype, std::size_t bytes, int ranks_per_host);

}  // namespace mcr
