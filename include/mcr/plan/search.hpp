// Layout search: every valid (tp, pp, dp, micro-batch, interleave, recompute, sequence parallel)
// for a number of GPUs and a global batch, ranked by predicted step time; layouts that do not fit
// in memory are kept apart and never ranked as if they ran.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mcr/codesign/advisor.hpp"
#include "mcr/plan/planner.hpp"

namespace mcr::plan {

/// Values the search may try. An empty list means "everything that is valid"; a given value
/// (from a command-line flag) pins that dimension.
struct SearchSpace {
  int gpus = 0;
  std::int64_t global_batch = 0;
  std::vector<int> tp;
  std::vector<int> pp;
  std::vector<int> dp;                    ///< default: what tp, cp and pp leave of the GPUs
  std::vector<std::int64_t> micro_batch;  ///< default: powers of two up to 16
  std::vector<int> interleave;            ///< default: 1, 2, 3, 4, 6, 8
  std::vector<Recompute> recompute;       ///< default: all three
  std::vector<bool> sequence_parallel;    ///< default: on when tp > 1, off otherwise
  std::vector<int> zero;                  ///< default: 0 and 1
  std::vector<int> cp;                    ///< default: 1
  std::vector<int> ep;  ///< default: 1; for MoE models also the powers of two dividing experts
  /// default: without and with Megatron's distributed optimizer (only with zero 0)
  std::vector<bool> distributed_optimizer;
  /// Modules recomputed by the schedules with selective recomputation (layout.recompute_modules;
  /// empty: core attention only).
  std::vector<std::string> recompute_modules;
  int etp = 0;
  double capacity_factor = 0;
  Dispatcher moe_dispatcher = Dispatcher::alltoall;
  Fp8 fp8 = Fp8::none;
  bool fp8_params = false;
  bool tp_comm_overlap = false;
  bool pp_comm_overlap = false;
  bool uneven_pipeline = false;
  bool allow_tp_across_nodes = false;
  bool dp_overlap = true;
};

struct SearchResult {
  std::vector<PlanResult> ranked;   ///< fit in memory, fastest first (at most `top`)
  std::vector<PlanResult> too_big;  ///< the fastest layouts that do not fit (at most `top`)
  std::int64_t evaluated = 0;       ///< layouts predicted
  std::int64_t rejected = 0;        ///< combinations that are not valid layouts
  std::int64_t out_of_memory = 0;
  /// Why the first combination that is not a valid layout was refused (empty: none was), so
  /// that a search in which none is valid can say why.
  std::string first_rejection;
};

/// {"evaluated", "rejected", "out_of_memory", "seconds", "ranked": [plan...], "too_big": [...]}.
nlohmann::json to_json(const SearchResult& found, double seconds);
/// The same with "device_peak": peak_to_json(device, dtype), as `mcr plan --search --json` prints
/// (`dtype`: the one MFU divides by, peak_dtype of the model's and the space's FP8 recipe).
nlohmann::json to_json(const SearchResult& found, double seconds,
                       const codesign::DeviceSpec& device, codesign::DType dtype);

SearchResult search_layouts(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                            const CommModel& comm, const SearchSpace& space, int top,
                            const PlanOptions& options = {});

struct AdvisedPair {
  codesign::Candidate shape;  ///< from the shape advisor (the input itself has empty `changes`)
  PlanResult best;            ///< fastest layout that fits
};

/// Runs the shape advisor, then the layout search for the input and for each candidate shape;
/// returns the input shape's (shape, layout) pair and the fastest `advisor.top` others, fastest
/// first. The advisor is asked for at least 10 bundled candidates whatever `top`, so that a
/// smaller `top` keeps a prefix of a larger one's list. Shapes with no layout that fits are
/// dropped.
/// Each pair's plan with its shape's "changes" and "param_delta".
nlohmann::json to_json(const std::vector<AdvisedPair>& pairs);

std::vector<AdvisedPair> advise_with_layouts(const codesign::ModelShape& model,
                                             const codesign::DeviceSpec& device,
                                             const CommModel& comm, const SearchSpace& space,
                                             const codesign::AdvisorOptions& advisor,
                                             const PlanOptions& options = {});

}  // namespace mcr::plan
