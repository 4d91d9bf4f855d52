// Shape advisor: searches shapes near a model within a parameter budget and ranks them by predicted
// throughput; `sweep` varies one dimension and records the throughput curve.
#pragma once

#include <cstdint>
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
};

struct Candidate {
  ModelShape shape;
  double params = 0;
  double param_delta = 0;  ///< relative to the input: P'/P - 1
  AnalysisTotals totals;
  double speedup = 0;              ///< predicted layer TFLOP/s over the input's
  double model_speedup = 0;        ///< predicted model TFLOP/s (layers + logits) over the input's
  std::vector<std::string> fixes;  ///< guideline ids the input has and this shape does not
  std::string changes;             ///< e.g. "a 32->20, v 50257->50304"
};

struct Advice {
  ModelShape input;
  double input_params = 0;
  AnalysisTotals input_totals;
  std::vector<Candidate> candidates;  ///< best first; only shapes faster than the input
  std::int64_t evaluated = 0;         ///< shapes analysed
};

/// Candidates keep h % a == 0, a_kv | a, h/a in [min_head_dim, max_head_dim], the MLP type and the
/// d_ff/h ratio (within ffn_steps), and a vocabulary >= the input's (padding only).
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
