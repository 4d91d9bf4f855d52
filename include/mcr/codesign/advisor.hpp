// Shape advisor: searches shapes near a model within a parameter budget and ranks them by predicted
// throughput; `sweep` varies one dimension and records the throughput curve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/codesign/model.hpp"

namespace mcr::codesign {

struct AdvisorOptions {
  double budget = 0.02;  ///< allowed relative parameter change, |P'/P - 1| <= budget
  int top = 5;           ///< candidates to return
  int hidden_steps = 8;  ///< h varies by up to this many multiples of 64 each way
  int layer_steps = 2;   ///< L varies by up to this many layers each way
  int ffn_steps = 4;     ///< d_ff varies by up to this many multiples of 64 each way
  std::int64_t min_head_dim = 32;
  std::int64_t max_head_dim = 128;  ///< larger head dims are faster but change the model more
  bool training = false;
  /// Tensor-parallel sizes every candidate must allow (t | a, and t and a_kv dividing one way).
  /// Empty: the model's t and those of 2, 4 and 8 that the input's head counts allow.
  std::vector<std::int64_t> tp_sizes;
  /// Relative speedups below this are within the model's error and shown as not significant.
  /// Unset: the device's calibrated error bar (advisor_uncertainty()).
  std::optional<double> uncertainty;
};

/// Threshold when a device has no calibration: the median |error| of the uncalibrated catalog
/// entries is 5-13% per GEMM on measured sweeps (docs/performance/gemm-model.md#cpu-calibration,
/// docs/performance/gpu-check.md#h200-gpu-check), and most of it is shared by two shapes of the
/// same model, so a smaller bar than one GEMM's error.
inline constexpr double kDefaultUncertainty = 0.03;

/// The relative gain below which the advisor calls a speedup within the model's error, and where
/// that figure comes from.
struct Uncertainty {
  double value = kDefaultUncertainty;
  std::string source;
};

/// `given` when set (--uncertainty); else the median held-out |error| of the device's calibration
/// (DeviceSpec::prediction_error), the error one predicted GEMM typically has on that device; else
/// kDefaultUncertainty, with a note that the device has no calibration data.
Uncertainty advisor_uncertainty(const DeviceSpec& device, std::optional<double> given);

struct Candidate {
  ModelShape shape;
  ModelAnalysis analysis;  ///< the candidate's analysis (the advisor's own, not recomputed)
  double params = 0;
  double param_delta = 0;  ///< relative to the input: P'/P - 1
  AnalysisTotals totals;
  double speedup = 0;              ///< predicted layer TFLOP/s over the input's
  double model_speedup = 0;        ///< predicted model TFLOP/s (layers + logits) over the input's
  std::vector<std::string> fixes;  ///< guideline ids the input has and this shape does not
  std::string changes;             ///< e.g. "a 32->20, v 50257->50304"
  int fields_changed = 0;          ///< how many of h, a, a_kv, L, d_ff, v differ from the input
  bool significant = true;         ///< model_speedup - 1 >= Advice::uncertainty
};

struct Advice {
  ModelShape input;
  double input_params = 0;
  AnalysisTotals input_totals;
  ModelAnalysis input_analysis;  ///< the input's analysis, for before/after comparisons
  /// Faster shapes. Single-field changes come first (the fastest per field, best first), then
  /// bundled changes best first; one candidate per (h, a) among the bundled ones.
  std::vector<Candidate> candidates;
  std::int64_t evaluated = 0;          ///< shapes analysed
  std::vector<std::int64_t> tp_sizes;  ///< the tensor-parallel sizes candidates allow
  double uncertainty = 0;              ///< the threshold used (advisor_uncertainty())
  std::string uncertainty_source;      ///< where it comes from
};

/// Candidates keep h % a == 0, a_kv | a, h/a in [min_head_dim, max_head_dim], the MLP type and the
/// d_ff/h ratio (within ffn_steps), a vocabulary >= the input's (padding only), multi-query
/// attention (a_kv = 1) or else the GQA group size a/a_kv, and every tensor-parallel size in
/// tp_sizes. An explicit head_dim is dropped: candidates use h/a.
Advice advise(const ModelShape& model, const DeviceSpec& device, const AdvisorOptions& options);

struct SweepPoint {
  std::int64_t value = 0;
  ModelShape shape;
  double params = 0;
  AnalysisTotals totals;
  bool valid = true;
  std::string reason;  ///< why the point is invalid
};

/// Sets a field by name: h, a, a_kv, L, v, s, b, d_ff, t, experts, top_k. Throws for other names.
void set_dimension(ModelShape& model, const std::string& field, std::int64_t value);
std::int64_t get_dimension(const ModelShape& model, const std::string& field);

/// Varies `field` from `first` to `last` (inclusive) by `step`. Invalid shapes (e.g. h % a != 0)
/// are kept with valid = false so the curve shows the gap.
std::vector<SweepPoint> sweep(const ModelShape& model, const DeviceSpec& device, bool training,
                              const std::string& field, std::int64_t first, std::int64_t last,
                              std::int64_t step);

}  // namespace mcr::codesign
