// What a caller asks of the planner, with every layout dimension either given (pinned) or left
// open: one layout to predict (to_layout), the space a search may try (to_search_space), and the
// pricing options (to_plan_options). `mcr plan` fills one from its flags; a program can fill one
// the same way. Errors name the fields ("request.dp_bucket_mb 0: ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mcr/codesign/device.hpp"
#include "mcr/plan/comm_model.hpp"
#include "mcr/plan/layout.hpp"
#include "mcr/plan/planner.hpp"
#include "mcr/plan/search.hpp"
#include "mcr/plan/system.hpp"

namespace mcr::plan {

/// An unset optional leaves the dimension to its default (to_layout) or to the search.
struct PlanRequest {
  std::optional<int> gpus, tp, pp, dp, interleave, zero, cp, ep, etp;
  std::optional<std::int64_t> micro_batch, global_batch;
  std::optional<std::string> recompute;  ///< none | selective | full
  std::vector<std::string> recompute_modules;
  bool sequence_parallel = false;  ///< pins the search to sequence parallelism when set
  bool allow_tp_across_nodes = false;
  bool dp_overlap = true;
  double capacity_factor = 0;
  std::string moe_dispatcher = "alltoall";  ///< alltoall | flex
  bool moe_glu_clamp = false;
  std::optional<std::string> fp8;  ///< none | delayed | current | blockwise | mxfp8
  bool fp8_params = false;
  bool distributed_optimizer = false;  ///< pins the search to it when set
  bool tp_comm_overlap = false;
  bool pp_comm_overlap = false;
  bool uneven_pipeline = false;
  std::optional<std::string> grad_dtype;  ///< default: the model's dtype
  double optimizer_bytes = 12;            ///< optimizer state per parameter (Adam, fp32 master)
  double dp_bucket_mb = 25;  ///< PyTorch DDP's bucket_cap_mb, and perf/train_step's (10^6 bytes)
};

/// The pricing options. Throws mcr::InvalidArgument naming the field for a bucket size that is not
/// a positive, finite number of megabytes, or optimizer bytes that are negative or not finite.
PlanOptions to_plan_options(const PlanRequest& request);

/// The one layout the request describes, unresolved (see resolve_layout): unset dimensions keep
/// Layout's defaults.
Layout to_layout(const PlanRequest& request);

/// The space a layout search may try: every set dimension is pinned to its value; gpus defaults
/// to the whole system.
SearchSpace to_search_space(const PlanRequest& request, const SystemSpec& system);

/// The communication model of `system` for `device` (GPU buffers unless it is a CPU), with the
/// measured tables ("FILE", "intra=FILE" or "inter=FILE", loaded in order) and selection rules
/// (MCR_RULES syntax; empty: none).
CommModel make_comm_model(const SystemSpec& system, const codesign::DeviceSpec& device,
                          const std::vector<std::string>& tables, const std::string& rules);

}  // namespace mcr::plan
