// Time of one collective on a group of GPUs placed on the system, either from the α-β links of the
// system or from measured `mcr tune` tables (one per link tier). With tables, the backend of each
// operation is chosen by the runtime's own selection function (mcr::select_backend): rules, then
// the tuning table, then the default priority; its time is interpolated from the table's samples.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mcr/comm/selection.hpp"
#include "mcr/comm/types.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {

enum class Collective { all_reduce, all_gather, reduce_scatter, p2p, all_to_all };
std::string to_string(Collective c);

/// Where the ranks of one group sit: `size` ranks, `per_node` of them on each of `nodes` nodes.
struct Placement {
  int size = 1;
  int per_node = 1;
  int nodes = 1;
};

/// Placement of a group of `size` ranks whose members are `stride` ranks apart, with ranks filled
/// node by node (Megatron's order: TP fastest, then DP, then PP).
Placement place_group(int size, int stride, int gpus_per_node);

struct CommCost {
  double time_s = 0;
  std::string backend;  ///< chosen backend; "alpha-beta" when the system's links were used
  std::string source;   ///< "alpha-beta", "table:intra", "table:inter", with the rule that chose it
};

/// Which tier a table describes: groups inside one node, groups across nodes, or both.
enum class Tier { intra, inter, any };

class CommModel {
 public:
  explicit CommModel(SystemSpec system, bool gpu_buffers = true);

  /// Adds a measured table for a tier. Later tables for the same tier replace earlier ones.
  void add_table(Tier tier, TuningTable table);
  void set_rules(RuleSet rules) { rules_ = std::move(rules); }

  /// `bytes` follows the nccl-tests convention (docs/tuning-format.md): the buffer for all_reduce
  /// and p2p, the whole output for all_gather, the whole input for reduce_scatter, each rank's
  /// send buffer for all_to_all. `form`: how the framework issues it (the gradient buckets of data
  /// parallelism are asynchronous, a tensor-parallel all-reduce is waited at once); a table may
  /// hold entries per form, as for the runtime.
  CommCost cost(Collective op, double bytes, const Placement& where, DType dtype,
                CallForm form = CallForm::sync) const;
  /// The α-β estimate alone (used for tiers without a table).
  double alpha_beta(Collective op, double bytes, const Placement& where) const;

  const SystemSpec& system() const { return system_; }

 private:
  std::optional<CommCost> from_table(const TuningTable& table, const char* tier, Collective op,
                                     double bytes, const Placement& where, DType dtype,
                                     CallForm form) const;
  SystemSpec system_;
  bool gpu_buffers_;
  std::optional<TuningTable> intra_;
  std::optional<TuningTable> inter_;
  RuleSet rules_;
};

/// Parses "FILE", "intra=FILE" or "inter=FILE" (the --comm-table argument).
std::pair<Tier, std::string> parse_table_argument(const std::string& arg);

}  // namespace mcr::plan
